"""GET /api/users/{username}/starred: the repositories a user starred, as the caller may see them."""

from __future__ import annotations


async def test_starred_lists_only_what_the_caller_may_read(client, alice, bob):
    for name, visibility in (("shown", "public"), ("hidden", "private")):
        resp = await client.post(
            "/api/repositories",
            json={"name": name, "visibility": visibility},
            headers=alice.headers,
        )
        assert resp.status == 201
        resp = await client.post(f"/api/repositories/alice/{name}/star", headers=alice.headers)
        assert resp.status in (200, 201, 204)
    mine = await (await client.get("/api/users/me/starred", headers=alice.headers)).json()
    assert [r["name"] for r in mine["repositories"]] == ["hidden", "shown"]
    theirs = await (await client.get("/api/users/alice/starred", headers=bob.headers)).json()
    assert [r["name"] for r in theirs["repositories"]] == ["shown"]
    assert (await client.get("/api/users/nobody/starred")).status == 404
