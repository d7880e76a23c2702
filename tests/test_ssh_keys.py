"""SSH public keys: the parser's verdicts, and the store under both engines."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from hubsvc.git.signatures import SIGNED
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


# Through HTTP


KEYS = "/api/users/me/keys"
REPO_KEYS = "/api/repositories/alice/proj/keys"


@pytest.fixture(scope="module")
def keyring(tmp_path_factory) -> dict[str, Path]:
    """Key pairs made once by the stock ssh-keygen, for the whole module."""
    folder = tmp_path_factory.mktemp("keys")
    made = {f"ed{n}": make_key(folder, "ed25519", name=f"ed{n}") for n in range(4)}
    made["rsa1024"] = make_key(folder, "rsa", 1024)
    made["dsa"] = make_key(folder, "dsa")
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(made["ed0"]), "-I", "id", "-n", "git"]
        + [str(made["ed3"]) + ".pub"],
        check=True,
    )
    made["cert"] = folder / "ed3-cert"  # its .pub is the certificate
    return made


async def add_key(client, user, line: str, title: str | None = "laptop", path: str = KEYS):
    body = {"key": line} if title is None else {"key": line, "title": title}
    return await client.post(path, json=body, headers=user.headers)


async def error_of(resp, status: int = 422) -> str:
    assert resp.status == status, (resp.status, await resp.text())
    return (await resp.json())["error"]


async def mails(config, count: int) -> list[str]:
    """The messages in the outbox folder (no SMTP configured), once count have arrived."""
    outbox = config.data_dir / "outbox"
    for _ in range(200):
        files = sorted(outbox.iterdir()) if outbox.exists() else []
        if len(files) >= count:
            break
        await asyncio.sleep(0.02)
    return [f.read_text() for f in sorted(outbox.iterdir())] if outbox.exists() else []


async def test_add_list_delete_own_keys_and_mail_the_owner(client, config, alice, bob, keyring):
    line = public_line(keyring["ed0"])
    resp = await add_key(client, alice, line)
    assert resp.status == 201, await resp.text()
    key = (await resp.json())["key"]
    assert key["title"] == "laptop" and key["key"] == " ".join(line.split()[:2])
    assert key["fingerprint"] == stock_fingerprint(keyring["ed0"])
    assert key["lastUsedAt"] is None and key["createdAt"] and "readOnly" not in key
    # No title: the key's comment.
    second = await add_key(client, alice, public_line(keyring["ed1"]), title=None)
    assert (await second.json())["key"]["title"] == "me@example.com"
    listed = await (await client.get(KEYS, headers=alice.headers)).json()
    assert [k["id"] for k in listed["keys"]] == [key["id"], (await second.json())["key"]["id"]]
    assert (await (await client.get(KEYS, headers=bob.headers)).json())["keys"] == []
    # Anyone sees a user's public keys, id and key only.
    public = await client.get("/api/users/alice/keys")
    assert public.status == 200
    assert (await public.json())["keys"][0] == {"id": key["id"], "key": key["key"]}
    assert (await client.get("/api/users/nobody/keys")).status == 404
    assert (await client.get(KEYS)).status == 401
    # Another user's key id is not found; the owner's goes.
    assert (await client.delete(f"{KEYS}/{key['id']}", headers=bob.headers)).status == 404
    assert (await client.delete(f"{KEYS}/x1", headers=alice.headers)).status == 404
    assert (await client.delete(f"{KEYS}/{key['id']}", headers=alice.headers)).status == 204
    assert (await client.delete(f"{KEYS}/{key['id']}", headers=alice.headers)).status == 404
    listed = await (await client.get(KEYS, headers=alice.headers)).json()
    assert [k["title"] for k in listed["keys"]] == ["me@example.com"]
    texts = await mails(config, 3)
    assert len(texts) == 3
    added = [t for t in texts if "A new SSH key was added" in t]
    removed = [t for t in texts if "An SSH key was removed" in t]
    assert len(added) == 2 and len(removed) == 1
    assert key["fingerprint"] in removed[0] and "laptop" in removed[0]
    assert all("To: alice@example.com" in t for t in texts)


async def test_a_token_cannot_add_a_key(client, alice, keyring):
    from .test_accounts import bearer, new_pat

    secret = (await new_pat(client, alice, "ci", scopes=["user:write"]))["secret"]
    resp = await client.post(
        KEYS, json={"key": public_line(keyring["ed0"])}, headers=bearer(secret)
    )
    assert "signed-in session" in await error_of(resp, 403)
    assert (await client.get(KEYS, headers=bearer(secret))).status == 200


@pytest.mark.parametrize(
    ("which", "reason"),
    [
        ("dsa", "DSA keys are not accepted"),
        ("rsa1024", "at least 2048 bits"),
        ("cert", "certificates are not accepted"),
        ("private", "this is a private key"),
        ("garbage", "not an OpenSSH public key"),
        ("undecodable", "does not decode"),
        ("mismatch", "holds ssh-ed25519"),
    ],
)
async def test_bad_keys_are_422_with_the_reason(client, alice, keyring, which, reason):
    ed_b64 = public_line(keyring["ed0"]).split()[1]
    line = {
        "private": keyring["ed0"].read_text(),
        "garbage": "not a key at all",
        "undecodable": "ssh-ed25519 AAAA%%%%",
        "mismatch": f"ssh-rsa {ed_b64}",
    }.get(which) or public_line(keyring[which])
    assert reason in await error_of(await add_key(client, alice, line))
    assert (await (await client.get(KEYS, headers=alice.headers)).json())["keys"] == []


async def test_a_key_is_in_one_place_and_the_422_says_where(client, alice, bob, keyring):
    from .test_repos import create

    await create(client, alice, "proj", visibility="private")
    mine = public_line(keyring["ed0"])
    assert (await add_key(client, alice, mine)).status == 201
    assert "your account" in await error_of(await add_key(client, alice, mine))
    said = await error_of(await add_key(client, bob, mine))
    assert "another account" in said and "alice" not in said
    # A user key cannot also be a deploy key, and the reverse.
    assert "your account" in await error_of(await add_key(client, alice, mine, path=REPO_KEYS))
    deploy = public_line(keyring["ed1"])
    assert (await add_key(client, alice, deploy, path=REPO_KEYS)).status == 201
    said = await error_of(await add_key(client, alice, deploy))
    assert "deploy key of alice/proj" in said
    # bob may not read the private repository: it stays unnamed.
    said = await error_of(await add_key(client, bob, deploy))
    assert "another account" in said and "proj" not in said


async def test_deploy_keys_by_admins_only(client, alice, bob, keyring):
    from .test_repos import create

    await create(client, alice, "proj")
    line = public_line(keyring["ed2"])
    # A stranger, then a writer: neither is an admin of the public repository.
    assert (await add_key(client, bob, line, path=REPO_KEYS)).status == 403
    assert (await client.get(REPO_KEYS, headers=bob.headers)).status == 403
    resp = await client.put(
        "/api/repositories/alice/proj/collaborators/bob",
        json={"permission": "write"},
        headers=alice.headers,
    )
    assert resp.status in (200, 201)
    assert (await add_key(client, bob, line, path=REPO_KEYS)).status == 403
    assert (await client.get(REPO_KEYS)).status == 401
    resp = await add_key(client, alice, line, path=REPO_KEYS)
    assert resp.status == 201
    key = (await resp.json())["key"]
    assert key["readOnly"] is True and key["fingerprint"] == stock_fingerprint(keyring["ed2"])
    listed = (await (await client.get(REPO_KEYS, headers=alice.headers)).json())["keys"]
    assert [k["id"] for k in listed] == [key["id"]]
    # A writable one, when asked.
    resp = await client.post(
        REPO_KEYS,
        json={"key": public_line(keyring["ed1"]), "title": "ci", "readOnly": False},
        headers=alice.headers,
    )
    assert (await resp.json())["key"]["readOnly"] is False
    # Deploy keys are not on anyone's public list.
    assert (await (await client.get("/api/users/alice/keys")).json())["keys"] == []
    assert (await client.delete(f"{REPO_KEYS}/{key['id']}", headers=bob.headers)).status == 403
    assert (await client.delete(f"{KEYS}/{key['id']}", headers=alice.headers)).status == 404
    assert (await client.delete(f"{REPO_KEYS}/{key['id']}", headers=alice.headers)).status == 204
    listed = (await (await client.get(REPO_KEYS, headers=alice.headers)).json())["keys"]
    assert [k["title"] for k in listed] == ["ci"]


# Signed commits


async def git_as(*args: str, cwd: Path, email: str = "alice@example.com", key: Path | None = None):
    """Stock git as a committer with this e-mail; with key, signing with it over SSH."""
    from .gitcli import ENV

    signing = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"] if key else []
    env = {**os.environ, **ENV, "GIT_COMMITTER_EMAIL": email, "GIT_AUTHOR_EMAIL": email}
    proc = await asyncio.create_subprocess_exec(
        "git",
        *signing,
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode().strip()


async def commit(work: Path, message: str, **kw) -> str:
    sign = ["-S"] if kw.get("key") else []
    await git_as("commit", "-q", "--allow-empty", *sign, "-m", message, cwd=work, **kw)
    return await git_as("rev-parse", "HEAD", cwd=work)


async def test_signed_commits_show_as_verified(client, alice, bob, keyring, tmp_path):
    from .gitcli import git, remote
    from .test_repos import create

    await create(client, alice, "proj", autoInit=True)
    assert (await add_key(client, alice, public_line(keyring["ed0"]))).status == 201
    work = tmp_path / "work"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    plain = await commit(work, "unsigned")
    good = await commit(work, "signed by alice", key=keyring["ed0"])
    stranger = await commit(work, "signed by a key nobody holds", key=keyring["ed1"])
    elsewhere = await commit(
        work, "alice's key, bob's address", key=keyring["ed0"], email="bob@example.com"
    )
    # The same signature over other bytes: a commit object made by hand.
    raw = await git_as("cat-file", "commit", good, cwd=work)
    forged_text = raw.replace("signed by alice", "signed by alice, or so it says") + "\n"
    proc = await asyncio.create_subprocess_exec(
        "git",
        "hash-object",
        "-t",
        "commit",
        "-w",
        "--stdin",
        cwd=work,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    forged = (await proc.communicate(forged_text.encode()))[0].decode().strip()
    await git("update-ref", "refs/heads/forged", forged, cwd=work)
    await git("push", "-q", "origin", "main", "forged", cwd=work)

    async def verifications(branch: str = "main") -> dict[str, dict]:
        resp = await client.get(f"/api/repositories/alice/proj/commits?branch={branch}")
        assert resp.status == 200, await resp.text()
        return {c["oid"]: c["verification"] for c in (await resp.json())["commits"]}

    shown = await verifications()
    assert shown[good] == {"verified": True, "reason": "valid", "signer": "alice"}
    assert shown[plain] == {"verified": False, "reason": "unsigned", "signer": None}
    assert shown[stranger]["reason"] == "unknown_key" and not shown[stranger]["verified"]
    assert shown[elsewhere]["reason"] == "bad_email" and not shown[elsewhere]["verified"]
    assert (await verifications("forged"))[forged]["reason"] == "invalid"
    diff = await client.get(f"/api/repositories/alice/proj/commits/{good}/diff")
    assert (await diff.json())["commit"]["verification"]["signer"] == "alice"
    diff = await client.get(f"/api/repositories/alice/proj/commits/{plain[:10]}/diff")
    assert (await diff.json())["commit"]["verification"]["reason"] == "unsigned"
    # An unsigned commit's diff stays immutable, and its ETag holds when nothing is kept
    # yet of whether it is signed (as after a restart).
    diff = await client.get(f"/api/repositories/alice/proj/commits/{plain}/diff")
    assert "immutable" in diff.headers["Cache-Control"]
    SIGNED._kept.clear()
    held = {"If-None-Match": diff.headers["ETag"]}
    diff = await client.get(f"/api/repositories/alice/proj/commits/{plain}/diff", headers=held)
    assert diff.status == 304
    signed_diff = await client.get(f"/api/repositories/alice/proj/commits/{good}/diff")
    assert "immutable" not in signed_diff.headers["Cache-Control"]
    held = {"If-None-Match": signed_diff.headers["ETag"]}
    diff = await client.get(f"/api/repositories/alice/proj/commits/{good}/diff", headers=held)
    assert diff.status == 304
    # The same answer revalidates; once the key set changes, it changes with it.
    page = await client.get(f"/api/repositories/alice/proj/commits?branch={good}")
    etag = page.headers["ETag"]
    assert "immutable" not in page.headers["Cache-Control"]
    again = await client.get(
        f"/api/repositories/alice/proj/commits?branch={good}", headers={"If-None-Match": etag}
    )
    assert again.status == 304
    ed1 = await add_key(client, alice, public_line(keyring["ed1"]), title="desktop")
    assert (await verifications())[stranger]["signer"] == "alice"
    mine = (await (await client.get(KEYS, headers=alice.headers)).json())["keys"]
    first = next(k for k in mine if k["title"] == "laptop")
    assert (await client.delete(f"{KEYS}/{first['id']}", headers=alice.headers)).status == 204
    assert (await verifications())[good]["reason"] == "unknown_key"
    changed = await client.get(
        f"/api/repositories/alice/proj/commits?branch={good}", headers={"If-None-Match": etag}
    )
    assert changed.status == 200
    diff = await client.get(f"/api/repositories/alice/proj/commits/{good}/diff", headers=held)
    assert diff.status == 200
    assert (await diff.json())["commit"]["verification"]["reason"] == "unknown_key"
    assert (await ed1.json())["key"]["title"] == "desktop"


@pytest.mark.parametrize(("kind", "bits"), [("ed25519", None), ("ecdsa", 384), ("rsa", 2048)])
def test_sshsig_checks_what_ssh_keygen_signs(tmp_path, kind, bits):
    from hubsvc.sshsig import BadSignature, OtherSignature, verify

    key = make_key(tmp_path, kind, bits)
    message = tmp_path / "payload"
    message.write_bytes(b"tree 0000\n\nhello\n")
    subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", "git", "-f", str(key), str(message)],
        check=True,
        capture_output=True,
    )
    armored = (tmp_path / "payload.sig").read_bytes()
    assert verify(armored, b"tree 0000\n\nhello\n") == parse_public_key(public_line(key)).blob
    for message_bytes, namespace in (
        (b"tree 0000\n\nhellO\n", "git"),
        (message.read_bytes(), "file"),
    ):
        with pytest.raises(BadSignature):
            verify(armored, message_bytes, namespace)
    lines = armored.splitlines()
    body = lines[-2]  # the last base64 line: the signature's own bytes
    lines[-2] = body[:4] + (b"B" if body[4:5] != b"B" else b"C") + body[5:]
    with pytest.raises(BadSignature):
        verify(b"\n".join(lines), message.read_bytes())
    with pytest.raises(OtherSignature):
        verify(b"-----BEGIN PGP SIGNATURE-----\n\nxx\n-----END PGP SIGNATURE-----\n", b"")


def test_the_signed_payload_is_the_commit_without_its_gpgsig_header():
    from hubsvc.git.signatures import split_signature

    raw = (
        b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
        b"author A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n"
        b"gpgsig -----BEGIN SSH SIGNATURE-----\n U1NIU0lH\n -----END SSH SIGNATURE-----\n"
        b"\nmessage\ngpgsig in the message is no header\n"
    )
    signature, payload = split_signature(raw)
    assert signature == b"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"
    assert payload == raw.replace(
        b"gpgsig -----BEGIN SSH SIGNATURE-----\n U1NIU0lH\n -----END SSH SIGNATURE-----\n", b""
    )
    assert split_signature(payload) is None
