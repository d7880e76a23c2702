// The second step of a sign-in (a code or a passkey) and the second factors' settings page.
import { api, get, post } from "./api.js";
import { h, mount, timeEl } from "./dom.js";
import { totpCard } from "./totp.js";
import { registerPasskey, signInWithPasskey, supported } from "./webauthn.js";

function problem(err) {
  if (err && err.name === "NotAllowedError") return "The passkey prompt was closed or timed out.";
  if (err && err.status === 429) return `Too many attempts: try again in ${err.retryAfter || "a few"} seconds.`;
  return (err && err.message) || "That did not work.";
}

// After the password: `answer` is {twoFactorRequired, challenge, methods}; signedIn() runs
// once the server has set the session, restart() goes back to the password form.
export function showSecondFactor(answer, signedIn, restart) {
  const methods = answer.methods || [];
  const message = h("p", { id: "second-factor-error", class: "error", role: "alert" });
  const codes = methods.includes("totp") || methods.includes("recovery");
  const code = h("input", {
    id: "code",
    name: "code",
    autocomplete: "one-time-code",
    inputmode: "text",
    spellcheck: "false",
    required: true,
  });
  const passkey =
    methods.includes("webauthn") && supported()
      ? h("button", { id: "use-passkey", type: "button" }, "Use a passkey")
      : null;
  const card = h(
    "form",
    { id: "second-factor", class: "card narrow" },
    h("h1", {}, "Two-factor authentication"),
    passkey ? h("p", {}, "Confirm it is you with your passkey or security key.") : null,
    passkey,
    codes
      ? [
          h("label", { for: "code" }, methods.includes("totp") ? "Code from your authenticator app, or a recovery code" : "A recovery code"),
          code,
          h("button", { type: "submit" }, "Verify"),
        ]
      : null,
    message,
    h("p", { class: "muted" }, h("a", { href: "#/sign-in", id: "start-over" }, "Start over")),
  );
  const gone = (err) => err && err.status === 401 && /challenge|sign in again/i.test(err.message || "");
  card.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    try {
      await post("/auth/sign-in/2fa", { challenge: answer.challenge, code: code.value.trim() });
    } catch (err) {
      message.textContent = err.status === 401 && !gone(err) ? "That code was not accepted." : problem(err);
      if (gone(err)) restart();
      return;
    }
    await signedIn();
  });
  if (passkey) {
    passkey.addEventListener("click", async () => {
      message.textContent = "";
      passkey.disabled = true;
      try {
        await signInWithPasskey(answer.challenge);
      } catch (err) {
        message.textContent = problem(err);
        passkey.disabled = false;
        return;
      }
      await signedIn();
    });
  }
  card.querySelector("#start-over").addEventListener("click", (ev) => {
    ev.preventDefault();
    restart();
  });
  mount(card);
  (passkey || code).focus();
}

function passkeyRow(p, refresh) {
  const password = h("input", {
    type: "password",
    class: "remove-password",
    placeholder: "Password to remove it",
    autocomplete: "current-password",
    "aria-label": `Password to remove ${p.name}`,
  });
  const remove = h("button", { type: "button", class: "remove-passkey" }, "Remove");
  const row = h(
    "li",
    { class: "passkey", "data-id": p.id },
    h(
      "span",
      {},
      h("strong", {}, p.name),
      " added ",
      timeEl(p.createdAt),
      p.lastUsedAt ? [", last used ", timeEl(p.lastUsedAt)] : ", never used",
    ),
    password,
    remove,
  );
  remove.addEventListener("click", async () => {
    try {
      await api("DELETE", `/api/users/me/2fa/webauthn/${encodeURIComponent(p.id)}`, {
        currentPassword: password.value,
      });
    } catch (err) {
      refresh(problem(err));
      return;
    }
    refresh("");
  });
  return row;
}

// #/security: the authenticator app on or off; the signed-in user's passkeys, one more to add, each to remove.
export async function showSecurity(note = "") {
  const state = await get("/api/users/me/2fa");
  const list = state.webauthn;
  const message = h("p", { id: "security-message", class: "error", role: "alert" }, note);
  const name = h("input", { id: "passkey-name", name: "passkey-name", placeholder: "Passkey", maxlength: 100 });
  const add = h("button", { id: "add-passkey", type: "submit" }, "Add a passkey");
  const form = h(
    "form",
    { id: "passkey-form" },
    h("label", { for: "passkey-name" }, "Name"),
    name,
    add,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    add.disabled = true;
    try {
      await registerPasskey(name.value.trim());
    } catch (err) {
      await showSecurity(problem(err));
      return;
    }
    await showSecurity();
  });
  mount(
    totpCard(state, () => showSecurity().catch(() => {})),
    h(
      "section",
      { class: "card", id: "security" },
      h("h1", {}, "Passkeys and security keys"),
      h(
        "p",
        { class: "muted" },
        "A passkey is a second factor: after your password, signing in asks for it. " +
          "Git over HTTP then needs a personal access token or SSH.",
      ),
      list.length
        ? h("ul", { id: "passkeys" }, list.map((p) => passkeyRow(p, (text) => showSecurity(text).catch(() => {}))))
        : h("p", { id: "no-passkeys", class: "muted" }, "No passkey yet."),
      supported() ? form : h("p", { class: "muted" }, "This browser cannot make passkeys."),
      message,
    ),
  );
}
