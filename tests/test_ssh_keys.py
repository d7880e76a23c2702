"""SSH public keys: the parser's verdicts, and the store under both engines."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hubsvc.keys import STORE
from hubsvc.sshkeys import KeyProblem, fingerprint_of, parse_public_key
from hubsvc.store.keys import KeyTaken


def make_key(folder: Path, kind: str, bits: int | None = None, name: str = "") -> Path:
    """A fresh key pair made by the stock ssh-keygen; the private key's path."""
    path = folder / (name or f"id_{kind}{bits or ''}")
    size = ["-b", str(bits)] if bits else []
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, *size, "-N", "", "-C", "me@example.com", "-f", str(path)],
        check=True,
    )
    return path


def public_line(path: Path) -> str:
    return path.with_name(path.name + ".pub").read_text()


def stock_fingerprint(path: Path) -> str:
    """The fingerprint ssh-keygen -l prints for a key."""
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(path)], capture_output=True, text=True
    )
    return out.stdout.split()[1]


@pytest.mark.parametrize(
    ("kind", "bits", "kind_name"),
    [
        ("ed25519", None, "ssh-ed25519"),
        ("ecdsa", 256, "ecdsa-sha2-nistp256"),
        ("ecdsa", 384, "ecdsa-sha2-nistp384"),
        ("ecdsa", 521, "ecdsa-sha2-nistp521"),
        ("rsa", 2048, "ssh-rsa"),
    ],
)
def test_accepted_kinds_parse_with_openssh_fingerprints(tmp_path, kind, bits, kind_name):
    path = make_key(tmp_path, kind, bits)
    key = parse_public_key(public_line(path))
    assert key.kind == kind_name
    assert key.fingerprint == stock_fingerprint(path)
    assert key.fingerprint == fingerprint_of(key.blob)
    assert key.bits == (bits or 256)
    assert key.comment == "me@example.com"
    assert key.line == " ".join(public_line(path).split()[:2])


def _reason(line: str) -> str:
    with pytest.raises(KeyProblem) as caught:
        parse_public_key(line)
    return caught.value.reason


def test_refused_keys_say_why(tmp_path):
    ed = make_key(tmp_path, "ed25519")
    ed_b64 = public_line(ed).split()[1]
    assert "DSA" in _reason(public_line(make_key(tmp_path, "dsa")))
    assert "at least 2048 bits" in _reason(public_line(make_key(tmp_path, "rsa", 1024)))
    assert "private key" in _reason(ed.read_text())
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(ed), "-I", "id", "-n", "git", str(ed) + ".pub"], check=True
    )
    assert "certificates" in _reason(ed.with_name(ed.name + "-cert.pub").read_text())
    assert "empty" in _reason("   ")
    assert "longer than" in _reason("ssh-ed25519 " + "A" * 9000)
    assert "no base64" in _reason("ssh-ed25519")
    assert "does not decode" in _reason("ssh-ed25519 !!!!")
    assert "holds ssh-ed25519" in _reason("ssh-rsa " + ed_b64)
    assert "not an OpenSSH public key" in _reason("hello world")
    assert "several lines" in _reason(public_line(ed) + public_line(ed))


async def test_store_keeps_one_key_in_one_place(client, alice, bob):
    store = client.app[STORE]
    line = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    key = parse_public_key(line)
    added = await store.keys.add("laptop", key.line, key.fingerprint, user_id=int(alice.id))
    assert added["username"] == "alice" and not added["disabled"]
    found = await store.keys.by_fingerprint(key.fingerprint)
    assert found["id"] == added["id"] and found["username"] == "alice"
    assert await store.keys.exists(added["id"])
    with pytest.raises(KeyTaken) as taken:
        await store.keys.add("again", key.line, key.fingerprint, user_id=int(bob.id))
    assert taken.value.holder["user_id"] == int(alice.id)
    assert [k["id"] for k in await store.keys.of_user(int(alice.id))] == [added["id"]]
    await store.keys.touch(added["id"])
    assert (await store.keys.get(added["id"]))["last_used_at"] is not None
    assert await store.keys.delete(added["id"], user_id=int(bob.id)) is None
    assert await store.keys.delete(added["id"], user_id=int(alice.id)) is not None
    assert not await store.keys.exists(added["id"])
    assert await store.keys.by_fingerprint(key.fingerprint) is None
