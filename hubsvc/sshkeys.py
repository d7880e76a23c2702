"""OpenSSH public key lines: parsed, checked against what the service accepts, fingerprinted."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

# The longest line taken: an RSA-16384 key with a long comment fits; past it the input is
# not a public key and is refused before any decoding.
MAX_LINE = 8192
MIN_RSA_BITS = 2048
MAX_RSA_BITS = 16384  # verifying with a larger modulus costs more than any real key needs
ACCEPTED = {
    "ssh-ed25519": "Ed25519",
    "ecdsa-sha2-nistp256": "ECDSA",
    "ecdsa-sha2-nistp384": "ECDSA",
    "ecdsa-sha2-nistp521": "ECDSA",
    "ssh-rsa": "RSA",
}
_CURVES = {
    "ecdsa-sha2-nistp256": "secp256r1",
    "ecdsa-sha2-nistp384": "secp384r1",
    "ecdsa-sha2-nistp521": "secp521r1",
}


class KeyProblem(ValueError):
    """A key line the service will not take; str() is the reason, fit for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class PublicKey:
    """An accepted key; line is its canonical "kind base64" form, without the comment."""

    kind: str
    blob: bytes
    fingerprint: str
    bits: int
    line: str
    comment: str = ""


def fingerprint_of(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a key's wire blob: "SHA256:" and unpadded base64."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return "SHA256:" + digest


def _blob_kind(blob: bytes) -> str:
    """The key type named inside the blob (its first SSH string)."""
    if len(blob) < 4:
        return ""
    size = int.from_bytes(blob[:4], "big")
    if size > 64 or len(blob) < 4 + size:
        return ""
    return blob[4 : 4 + size].decode("ascii", "replace")


def _refuse_kind(kind: str) -> None:
    """Raise the reason a key type that is not accepted is refused."""
    if kind == "ssh-dss":
        raise KeyProblem("DSA keys are not accepted (they are insecure); use an Ed25519 key")
    if kind.endswith("-cert-v01@openssh.com"):
        # Refused outright: a certificate's trust comes from its CA and its options, and
        # an account key stands for itself; the plain key beneath it can be added.
        raise KeyProblem("SSH certificates are not accepted; add the plain public key instead")
    if kind.startswith("sk-"):
        raise KeyProblem("security-key (sk-) keys are not supported; use an Ed25519 key")
    raise KeyProblem(
        "not an OpenSSH public key line: it must start with ssh-ed25519,"
        " ecdsa-sha2-nistp256/384/521 or ssh-rsa"
    )


def parse_public_key(line: str) -> PublicKey:
    """Parse one OpenSSH public key line ("kind base64 [comment]"), or raise KeyProblem."""
    if not isinstance(line, str):
        raise KeyProblem("the key must be a string")
    if len(line) > MAX_LINE:
        raise KeyProblem(f"the key is longer than {MAX_LINE} characters")
    text = line.strip()
    if "-----BEGIN" in text or "PRIVATE KEY" in text:
        if "PRIVATE" in text:
            raise KeyProblem(
                "this is a private key: never share it; paste the public key (the .pub file)"
            )
        raise KeyProblem("PEM keys are not accepted; paste the OpenSSH public key (the .pub file)")
    if text.startswith("---- BEGIN SSH2"):
        raise KeyProblem("RFC 4716 keys are not accepted; convert it with ssh-keygen -i -f FILE")
    if not text:
        raise KeyProblem("the key is empty")
    if "\n" in text or "\r" in text:
        raise KeyProblem("one key per line: the key spans several lines")
    parts = text.split(None, 2)
    kind = parts[0]
    if kind not in ACCEPTED:
        _refuse_kind(kind)
    if len(parts) < 2:
        raise KeyProblem("the key has no base64 part after its type")
    comment = parts[2].strip() if len(parts) > 2 else ""
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise KeyProblem("the key's base64 part does not decode") from None
    inner = _blob_kind(blob)
    if inner != kind:
        if inner and inner not in ACCEPTED:
            _refuse_kind(inner)
        raise KeyProblem(f"the key says {kind} but holds {inner or 'something else'}")
    try:
        key = load_ssh_public_key(f"{kind} {parts[1]}".encode())
    except (ValueError, UnsupportedAlgorithm):
        raise KeyProblem(f"not a valid {ACCEPTED[kind]} key") from None
    bits = _bits(kind, key)
    canonical = base64.b64encode(blob).decode()
    return PublicKey(kind, blob, fingerprint_of(blob), bits, f"{kind} {canonical}", comment)


def _bits(kind: str, key: object) -> int:
    """The key's size in bits, after checking it is one the service accepts."""
    if isinstance(key, ed25519.Ed25519PublicKey):
        return 256
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name != _CURVES.get(kind):
            raise KeyProblem(f"the key's curve {key.curve.name} does not match {kind}")
        return key.curve.key_size
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise KeyProblem(
                f"RSA keys must have at least {MIN_RSA_BITS} bits; this one has {key.key_size}"
            )
        if key.key_size > MAX_RSA_BITS:
            raise KeyProblem(f"RSA keys may have at most {MAX_RSA_BITS} bits")
        return key.key_size
    raise KeyProblem(f"not a valid {ACCEPTED.get(kind, kind)} key")
