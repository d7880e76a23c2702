"""Second factors and SSH keys in the security log: one entry each, for whom it concerns."""

from __future__ import annotations

from .conftest import sign_up
from .test_ssh_keys import make_key, public_line
from .test_two_factor import enrol, password_step, second_step

MY_LOG = "/api/users/me/security-log"


async def actions(client, user) -> list[str]:
    resp = await client.get(MY_LOG, headers=user.headers, params={"limit": 100})
    assert resp.status == 200, await resp.text()
    return [e["action"] for e in (await resp.json())["entries"]]


async def test_factors_and_keys_leave_one_entry_each(client, alice, tmp_path):
    stranger = await sign_up(client, "stranger")
    secret, codes = await enrol(client, alice)
    challenge = (await password_step(client, alice))["challenge"]
    resp = await second_step(client, challenge, codes[0])
    assert resp.status == 200, await resp.text()
    resp = await client.post(
        "/api/users/me/keys",
        json={"title": "laptop", "key": public_line(make_key(tmp_path, "ed25519"))},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    key_id = (await resp.json())["key"]["id"]
    assert (
        await client.delete(f"/api/users/me/keys/{key_id}", headers=alice.headers)
    ).status == 204
    resp = await client.request(
        "DELETE",
        "/api/users/me/2fa/totp",
        json={"currentPassword": alice.password, "code": codes[1]},
        headers=alice.headers,
    )
    assert resp.status == 204, await resp.text()
    mine = await actions(client, alice)
    for action in (
        "2fa.totp.enabled",
        "auth.2fa",
        "ssh.key.added",
        "ssh.key.removed",
        "2fa.totp.disabled",
    ):
        assert mine.count(action) == 1, (action, mine)
    resp = await client.get(MY_LOG, headers=alice.headers, params={"action": "auth.2fa"})
    assert (await resp.json())["entries"][0]["data"]["method"] == "recovery"
    theirs = await actions(client, stranger)
    assert not any(a.startswith(("2fa.", "ssh.key", "auth.2fa")) for a in theirs), theirs
