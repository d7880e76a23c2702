// Passkeys in the browser: the server's options (JSON, binary fields base64url) turned
// into what navigator.credentials takes, and the browser's credential back into JSON.
import { post } from "./api.js";

export function fromB64url(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  const raw = atob(b64);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes.buffer;
}

export function toB64url(buffer) {
  const bytes = new Uint8Array(buffer);
  let raw = "";
  for (const b of bytes) raw += String.fromCharCode(b);
  return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export const supported = () => typeof window.PublicKeyCredential === "function" && !!navigator.credentials;

const descriptors = (list) => (list || []).map((c) => ({ ...c, id: fromB64url(c.id) }));

export function creationOptions(options) {
  return {
    ...options,
    challenge: fromB64url(options.challenge),
    user: { ...options.user, id: fromB64url(options.user.id) },
    excludeCredentials: descriptors(options.excludeCredentials),
  };
}

export function requestOptions(options) {
  return { ...options, challenge: fromB64url(options.challenge), allowCredentials: descriptors(options.allowCredentials) };
}

// PublicKeyCredential.toJSON() by hand: older browsers lack it.
export function credentialJSON(cred) {
  const r = cred.response;
  const response = { clientDataJSON: toB64url(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = toB64url(r.attestationObject);
    response.transports = typeof r.getTransports === "function" ? r.getTransports() : [];
  } else {
    response.authenticatorData = toB64url(r.authenticatorData);
    response.signature = toB64url(r.signature);
    if (r.userHandle) response.userHandle = toB64url(r.userHandle);
  }
  return {
    id: cred.id,
    rawId: toB64url(cred.rawId),
    type: cred.type,
    response,
    clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
    authenticatorAttachment: cred.authenticatorAttachment || undefined,
  };
}

// Register a passkey for the signed-in user; answers the stored passkey.
export async function registerPasskey(name) {
  const options = await post("/api/users/me/2fa/webauthn/register");
  const cred = await navigator.credentials.create({ publicKey: creationOptions(options) });
  const body = { credential: credentialJSON(cred) };
  if (name) body.name = name;
  return (await post("/api/users/me/2fa/webauthn/register/finish", body)).webauthn;
}

// The passkey step of a sign-in: the password step's challenge in, the sign-in answer out.
export async function signInWithPasskey(challenge) {
  const options = await post("/auth/sign-in/webauthn", { challenge });
  const cred = await navigator.credentials.get({ publicKey: requestOptions(options) });
  return post("/auth/sign-in/webauthn/finish", { challenge, credential: credentialJSON(cred) });
}
