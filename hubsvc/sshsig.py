"""OpenSSH signatures (SSHSIG, what `ssh-keygen -Y sign` and git's gpg.format=ssh write)."""

from __future__ import annotations

import base64
import binascii
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

from .sshkeys import KeyProblem, parse_public_key

BEGIN = b"-----BEGIN SSH SIGNATURE-----"
END = b"-----END SSH SIGNATURE-----"
MAGIC = b"SSHSIG"
MAX_ARMORED = 16384  # an RSA-16384 signature with its key fits; past it, no signature
_HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}
_RSA: dict[str, type[hashes.SHA256 | hashes.SHA512]] = {
    "rsa-sha2-256": hashes.SHA256,
    "rsa-sha2-512": hashes.SHA512,
}
_ECDSA: dict[str, type[hashes.SHA256 | hashes.SHA384 | hashes.SHA512]] = {
    "ecdsa-sha2-nistp256": hashes.SHA256,
    "ecdsa-sha2-nistp384": hashes.SHA384,
    "ecdsa-sha2-nistp521": hashes.SHA512,
}


class BadSignature(ValueError):
    """The signature is malformed or does not verify (GitHub's `invalid`)."""


class OtherSignature(ValueError):
    """Not an SSH signature this service can check: PGP, X.509, or a key kind it refuses."""


class _Reader:
    """SSH wire strings and integers, read in order from a blob."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise BadSignature("truncated signature")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def uint32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def string(self) -> bytes:
        return self.take(self.uint32())

    def mpint(self) -> int:
        return int.from_bytes(self.string(), "big", signed=True)

    def done(self) -> bool:
        return self.at == len(self.data)


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def unarmor(armored: bytes) -> bytes:
    """The SSHSIG blob inside an armored signature."""
    text = armored.strip()
    if not text.startswith(BEGIN):
        raise OtherSignature("not an SSH signature")
    if len(text) > MAX_ARMORED or not text.endswith(END):
        raise BadSignature("malformed armor")
    body = b"".join(text[len(BEGIN) : -len(END)].split())
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise BadSignature("malformed base64") from None


def verify(armored: bytes, message: bytes, namespace: str = "git") -> bytes:
    """The signer's public key blob when armored is a good SSHSIG of message in namespace.

    BadSignature when it is malformed or does not verify; OtherSignature when it is
    not one this service checks (a PGP signature, a key kind no account may hold).
    """
    blob = _Reader(unarmor(armored))
    if blob.take(6) != MAGIC or blob.uint32() != 1:
        raise BadSignature("not an SSHSIG version 1 signature")
    key_blob = blob.string()
    signed_namespace, reserved, hash_name = blob.string(), blob.string(), blob.string()
    signature = _Reader(blob.string())
    if not blob.done():
        raise BadSignature("trailing data after the signature")
    if signed_namespace != namespace.encode():
        raise BadSignature("signed for another namespace")
    digest = _HASHES.get(hash_name.decode("ascii", "replace"))
    if digest is None:
        raise BadSignature("unknown hash algorithm")
    kind = key_blob[4 : 4 + int.from_bytes(key_blob[:4], "big")].decode("ascii", "replace")
    try:
        key = parse_public_key(f"{kind} {base64.b64encode(key_blob).decode()}")
    except KeyProblem:
        raise OtherSignature("a key kind no account may hold") from None
    signed = (
        MAGIC
        + _ssh_string(signed_namespace)
        + _ssh_string(reserved)
        + _ssh_string(hash_name)
        + _ssh_string(digest(message).digest())
    )
    sig_format = signature.string().decode("ascii", "replace")
    sig_blob = signature.string()
    if not signature.done():
        raise BadSignature("trailing data in the signature")
    _check(key.kind, key_blob, sig_format, sig_blob, signed)
    return key_blob


def _check(kind: str, key_blob: bytes, sig_format: str, sig_blob: bytes, signed: bytes) -> None:
    """Verify one signature over signed with the key of key_blob, or raise BadSignature."""
    public = load_ssh_public_key(f"{kind} {base64.b64encode(key_blob).decode()}".encode())
    try:
        if isinstance(public, ed25519.Ed25519PublicKey) and sig_format == "ssh-ed25519":
            public.verify(sig_blob, signed)
        elif isinstance(public, ec.EllipticCurvePublicKey) and sig_format == kind:
            parts = _Reader(sig_blob)
            r, s = parts.mpint(), parts.mpint()
            if not parts.done():
                raise BadSignature("trailing data in the ECDSA signature")
            public.verify(encode_dss_signature(r, s), signed, ec.ECDSA(_ECDSA[kind]()))
        elif isinstance(public, rsa.RSAPublicKey) and sig_format in _RSA:
            # ssh-rsa (SHA-1) signatures are refused, as ssh-keygen -Y verify does.
            public.verify(sig_blob, signed, padding.PKCS1v15(), _RSA[sig_format]())
        else:
            raise BadSignature(f"a {sig_format} signature from a {kind} key")
    except InvalidSignature:
        raise BadSignature("the signature does not match") from None
