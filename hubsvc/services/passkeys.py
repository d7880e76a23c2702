"""WebAuthn ceremonies with py_webauthn: the relying party is this server's base URL.

The library builds the options and verifies what the browser answers (client data,
origin, relying party id hash, user presence, signature, counter); this module keeps
each ceremony's challenge in the database, single use, so any process may finish it.

py_webauthn (and the pyOpenSSL it brings) is imported by the ceremonies themselves, on
first use: it was the largest import of a server start (a third of a second of CPU,
`python -X importtime`), paid by every process and every test's server, most of which
never see a passkey.
"""

from __future__ import annotations

import hashlib
import json
from base64 import urlsafe_b64encode
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from ..config import Config
from ..errors import BadRequest, Unauthorized
from ..store import Store

if TYPE_CHECKING:
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor

# The browser's prompt stays up this long; the stored challenge lives a little longer.
TIMEOUT_MS = 120_000
CHALLENGE_TTL = TIMEOUT_MS / 1000 + 30
REGISTER, SIGN_IN = "register", "sign-in"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class RelyingParty(NamedTuple):
    """Who the credentials are for: the base URL's host, and the origin pages come from."""

    id: str
    origin: str
    name: str


def relying_party(config: Config) -> RelyingParty:
    """The relying party of [server] base_url (its host; its origin without a default port)."""
    parts = urlsplit(str(config.base_url))
    host = parts.hostname or "localhost"
    port = parts.port
    netloc = host if port in (None, _DEFAULT_PORTS.get(parts.scheme)) else f"{host}:{port}"
    if ":" in host:  # an IPv6 literal (no valid relying party id, but a well-formed origin)
        netloc = f"[{host}]" + netloc[len(host) :]
    return RelyingParty(host, f"{parts.scheme}://{netloc}", "hubsvc")


def _descriptors(passkeys: list[dict[str, Any]]) -> list[PublicKeyCredentialDescriptor]:
    from webauthn.helpers.structs import AuthenticatorTransport, PublicKeyCredentialDescriptor

    known = {t.value for t in AuthenticatorTransport}
    return [
        PublicKeyCredentialDescriptor(
            id=p["credential_id"],
            transports=[AuthenticatorTransport(t) for t in p["transports"] if t in known],
        )
        for p in passkeys
    ]


def _challenge_of(parse: Any, credential: Any) -> tuple[Any, bytes]:
    """The parsed credential and the challenge its client data names; 400 when malformed."""
    from webauthn.helpers import parse_client_data_json
    from webauthn.helpers.exceptions import WebAuthnException

    if not isinstance(credential, dict):
        raise BadRequest("credential: must be an object, as PublicKeyCredential.toJSON() gives")
    try:
        parsed = parse(credential)
        return parsed, parse_client_data_json(parsed.response.client_data_json).challenge
    except (WebAuthnException, ValueError, KeyError, TypeError, AttributeError) as err:
        raise BadRequest(f"credential: not a WebAuthn credential ({err})") from None


def sign_in_bound(challenge: str) -> bytes:
    """What a passkey sign-in's challenge is tied to: the password step's challenge."""
    return hashlib.sha256(challenge.encode()).digest()


async def registration_options(store: Store, config: Config, user: dict[str, Any]) -> str:
    """Options for navigator.credentials.create, as JSON; the challenge kept for finish."""
    import webauthn
    from webauthn.helpers.structs import (
        AuthenticatorSelectionCriteria,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    rp = relying_party(config)
    options = webauthn.generate_registration_options(
        rp_id=rp.id,
        rp_name=rp.name,
        user_name=user["username"],
        # The account id, not a name: a rename keeps the authenticator's entry right.
        user_id=str(user["id"]).encode(),
        user_display_name=user["name"] or user["username"],
        timeout=TIMEOUT_MS,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.PREFERRED,
        ),
        # The same authenticator twice would be no second key: the browser says so.
        exclude_credentials=_descriptors(await store.passkeys.listing(user["id"])),
    )
    await store.passkeys.add_challenge(user["id"], REGISTER, options.challenge, CHALLENGE_TTL)
    return webauthn.options_to_json(options)


async def finish_registration(
    store: Store, config: Config, user: dict[str, Any], credential: Any, name: str
) -> dict[str, Any]:
    """Verify an attestation against this user's live challenge and store the passkey."""
    import webauthn
    from webauthn.helpers import parse_registration_credential_json
    from webauthn.helpers.exceptions import WebAuthnException

    parsed, challenge = _challenge_of(parse_registration_credential_json, credential)
    if await store.passkeys.take_challenge(challenge, REGISTER, user_id=user["id"]) is None:
        raise BadRequest(
            "credential: its challenge is not one this account asked for, or it expired or "
            "was used: ask for new options"
        )
    rp = relying_party(config)
    try:
        verified = webauthn.verify_registration_response(
            credential=parsed,
            expected_challenge=challenge,
            expected_rp_id=rp.id,
            expected_origin=rp.origin,
        )
    except WebAuthnException as err:
        raise BadRequest(f"credential: refused ({err})") from None
    transports = [t.value for t in parsed.response.transports or []]
    return await store.passkeys.add(
        user["id"],
        verified.credential_id,
        verified.credential_public_key,
        verified.sign_count,
        name,
        transports,
    )


async def sign_in_options(
    store: Store, config: Config, user: dict[str, Any], bound: bytes
) -> str | None:
    """Options for navigator.credentials.get naming the user's passkeys (None: they have none)."""
    import webauthn
    from webauthn.helpers.structs import UserVerificationRequirement

    passkeys = await store.passkeys.listing(user["id"])
    if not passkeys:
        return None
    options = webauthn.generate_authentication_options(
        rp_id=relying_party(config).id,
        timeout=TIMEOUT_MS,
        allow_credentials=_descriptors(passkeys),
        user_verification=UserVerificationRequirement.PREFERRED,
    )
    await store.passkeys.add_challenge(
        user["id"], SIGN_IN, options.challenge, CHALLENGE_TTL, bound=bound
    )
    return webauthn.options_to_json(options)


def assertion_challenge(credential: Any) -> tuple[Any, bytes]:
    """A sign-in assertion parsed, and the challenge its client data names (400: malformed)."""
    from webauthn.helpers import parse_authentication_credential_json

    return _challenge_of(parse_authentication_credential_json, credential)


async def verify_assertion(
    store: Store, config: Config, user_id: int, parsed: Any, challenge: bytes
) -> dict[str, Any]:
    """Check an assertion by one of user_id's passkeys, and store its counter; 401 if not."""
    import webauthn
    from webauthn.helpers.exceptions import WebAuthnException

    passkey = await store.passkeys.by_credential(user_id, parsed.raw_id)
    if passkey is None:
        raise Unauthorized("this passkey is not one of this account's")
    rp = relying_party(config)
    try:
        verified = webauthn.verify_authentication_response(
            credential=parsed,
            expected_challenge=challenge,
            expected_rp_id=rp.id,
            expected_origin=rp.origin,
            credential_public_key=passkey["public_key"],
            credential_current_sign_count=passkey["sign_count"],
        )
    except WebAuthnException as err:
        # A counter that did not move forward lands here too: a cloned authenticator.
        raise Unauthorized(f"the passkey's answer was refused ({err})") from None
    if not await store.passkeys.used(passkey["id"], passkey["sign_count"], verified.new_sign_count):
        raise Unauthorized("the passkey was used at the same time elsewhere: sign in again")
    return passkey


def passkey_json(passkey: dict[str, Any]) -> dict[str, Any]:
    """A passkey as the API shows it (never its public key)."""
    return {
        "id": str(passkey["id"]),
        "name": passkey["name"],
        # py_webauthn's bytes_to_base64url, without importing it for a listing.
        "credentialId": urlsafe_b64encode(passkey["credential_id"]).decode().rstrip("="),
        "transports": passkey["transports"],
        "createdAt": passkey["created_at"],
        "lastUsedAt": passkey["last_used_at"],
    }


def options_dict(options_json: str) -> dict[str, Any]:
    """Options JSON as an object, to nest in an answer."""
    return dict(json.loads(options_json))
