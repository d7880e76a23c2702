"""Profiles, summary, avatars, settings and preferences."""

from __future__ import annotations

import io

import aiohttp
from PIL import Image

from .test_avatars import encode

PNG = encode(Image.new("RGB", (2, 2), (255, 0, 0)), "PNG")
GIF = encode(Image.new("RGB", (2, 2), (0, 0, 255)), "GIF")


async def test_public_profile_and_me(client, alice, bob):
    resp = await client.get("/api/users/alice")
    body = await resp.json()
    assert body["user"]["username"] == "alice"
    assert "email" not in body["user"]
    resp = await client.get("/api/users/ALICE", headers=bob.headers)
    assert "email" not in (await resp.json())["user"]
    resp = await client.get("/api/users/alice", headers=alice.headers)
    assert (await resp.json())["user"]["email"] == "alice@example.com"


async def test_detailed_profile(client, alice):
    await client.patch(
        "/api/users/me/settings",
        headers=alice.headers,
        json={"bio": "I write code", "location": "Lyon", "website": "https://alice.example"},
    )
    resp = await client.get("/api/users/alice/profile")
    profile = (await resp.json())["profile"]
    assert profile["bio"] == "I write code"
    assert profile["location"] == "Lyon"
    assert profile["website"] == "https://alice.example"
    assert profile["repositoryCount"] == 0 and profile["starCount"] == 0
    assert profile["createdAt"].endswith("Z")
    assert "email" not in profile
    assert (await client.get("/api/users/nobody/profile")).status == 404


async def test_summary_is_the_bare_object(client, alice):
    resp = await client.get("/api/users/me/summary", headers=alice.headers)
    body = await resp.json()
    assert set(body) == {"username", "name", "avatarUrl"}
    assert body["avatarUrl"].startswith("http://127.0.0.1:8080/api/users/alice/avatar?v=")


async def test_generated_avatar_then_upload_roundtrip_then_delete(client, alice):
    me = (await (await client.get("/api/users/me", headers=alice.headers)).json())["user"]
    url = me["avatarUrl"].replace("http://127.0.0.1:8080", "")
    resp = await client.get(url)
    assert resp.status == 200 and resp.content_type == "image/png"
    generated = await resp.read()
    assert Image.open(io.BytesIO(generated)).format == "PNG"
    assert "immutable" in resp.headers["Cache-Control"]
    etag = resp.headers["ETag"]
    resp = await client.get(url, headers={"If-None-Match": etag})
    assert resp.status == 304

    resp = await client.patch(
        "/api/users/me/avatar", data=PNG, headers={**alice.headers, "Content-Type": "image/png"}
    )
    assert resp.status == 200, await resp.text()
    new_url = (await resp.json())["user"]["avatarUrl"].replace("http://127.0.0.1:8080", "")
    assert new_url != url
    resp = await client.get(new_url)
    assert resp.content_type == "image/png"
    stored = Image.open(io.BytesIO(await resp.read()))
    assert stored.convert("RGB").tobytes() == Image.open(io.BytesIO(PNG)).tobytes()
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    # The old version is not immutable any more: it must be revalidated.
    resp = await client.get(url)
    assert "immutable" not in resp.headers["Cache-Control"]

    form = aiohttp.FormData()
    form.add_field("avatar", io.BytesIO(GIF), filename="a.gif", content_type="image/gif")
    resp = await client.patch("/api/users/me/avatar", data=form, headers=alice.headers)
    assert resp.status == 200
    gif_url = (await resp.json())["user"]["avatarUrl"].replace("http://127.0.0.1:8080", "")
    resp = await client.get(gif_url)
    assert resp.content_type == "image/png"  # re-encoded: what is served is what was stored
    assert Image.open(io.BytesIO(await resp.read())).convert("RGB").getpixel((0, 0)) == (0, 0, 255)

    assert (await client.delete("/api/users/me/avatar", headers=alice.headers)).status == 204
    me = (await (await client.get("/api/users/me", headers=alice.headers)).json())["user"]
    assert me["avatarUrl"].replace("http://127.0.0.1:8080", "") == url
    assert await (await client.get(url)).read() == generated


async def test_avatar_checked_by_content_and_size(aiohttp_client, tmp_path):
    from hubsvc.app import create_app

    from .conftest import make_config, sign_up

    client = await aiohttp_client(create_app(make_config(tmp_path, limits__avatar_bytes=2048)))
    user = await sign_up(client, "frank")
    resp = await client.patch(
        "/api/users/me/avatar",
        data=b"<svg onload=alert(1)>",
        headers={**user.headers, "Content-Type": "image/png"},
    )
    assert resp.status == 422
    resp = await client.patch(
        "/api/users/me/avatar",
        data=PNG + b"\x00" * 4096,
        headers={**user.headers, "Content-Type": "image/png"},
    )
    assert resp.status == 413
    form = aiohttp.FormData()
    form.add_field(
        "avatar", io.BytesIO(PNG + b"\x00" * 4096), filename="a.png", content_type="image/png"
    )
    resp = await client.patch("/api/users/me/avatar", data=form, headers=user.headers)
    assert resp.status == 413
    form = aiohttp.FormData()
    form.add_field("picture", io.BytesIO(PNG), filename="a.png", content_type="image/png")
    resp = await client.patch("/api/users/me/avatar", data=form, headers=user.headers)
    assert resp.status == 400
    resp = await client.patch("/api/users/me/avatar", data=PNG, headers=user.headers)
    assert resp.status == 400  # no image content type and not multipart


async def test_settings_and_preferences(client, alice):
    resp = await client.get("/api/users/me/settings", headers=alice.headers)
    settings = (await resp.json())["settings"]
    assert settings["preferences"] == {
        "theme": "system",
        "notifications": {"web": True, "chat": True, "email": True},
    }
    resp = await client.patch(
        "/api/users/me/settings",
        headers=alice.headers,
        json={"name": "Alice L.", "email": "al@example.com", "currentPassword": alice.password},
    )
    assert (await resp.json())["settings"]["name"] == "Alice L."
    me = (await (await client.get("/api/users/me", headers=alice.headers)).json())["user"]
    assert me["name"] == "Alice L." and me["email"] == "al@example.com"
    resp = await client.post(
        "/api/users/me/settings/preferences",
        headers=alice.headers,
        json={"theme": "dark", "notifications": {"email": False}},
    )
    prefs = (await resp.json())["preferences"]
    assert prefs == {"theme": "dark", "notifications": {"web": True, "chat": True, "email": False}}
    resp = await client.post(
        "/api/users/me/settings/preferences", headers=alice.headers, json={"theme": "neon"}
    )
    assert resp.status == 400 and "theme" in (await resp.json())["error"]
    settings = await (await client.get("/api/users/me/settings", headers=alice.headers)).json()
    assert settings["settings"]["preferences"]["theme"] == "dark"
    assert (await client.get("/api/users/me/settings")).status == 401


async def test_email_change_to_a_taken_one_is_409(client, alice, bob):
    resp = await client.patch(
        "/api/users/me/settings",
        headers=alice.headers,
        json={"email": "BOB@example.com", "currentPassword": alice.password},
    )
    assert resp.status == 409


async def test_email_change_needs_the_current_password(client, alice):
    """As on GitHub and Gitea: the e-mail is where a reset goes, so a stolen session or
    token alone must not move it. Other settings need no password."""
    url = "/api/users/me/settings"

    async def email_now():
        me = await (await client.get("/api/users/me", headers=alice.headers)).json()
        return me["user"]["email"]

    resp = await client.patch(url, headers=alice.headers, json={"email": "thief@example.com"})
    assert resp.status == 400
    assert (await resp.json())["error"].startswith("currentPassword: "), await resp.text()
    resp = await client.patch(
        url,
        headers=alice.headers,
        json={"email": "thief@example.com", "currentPassword": "wrong one!"},
    )
    assert resp.status == 403
    # The same answer as a password change with a wrong current password.
    assert await resp.json() == {"error": "currentPassword is not the account's password"}
    assert await email_now() == "alice@example.com"
    # Other fields, and the e-mail sent back unchanged, need none.
    resp = await client.patch(
        url, headers=alice.headers, json={"bio": "hi", "email": "alice@example.com"}
    )
    assert resp.status == 200 and (await resp.json())["settings"]["bio"] == "hi"
    resp = await client.patch(
        url,
        headers=alice.headers,
        json={"email": "new@example.com", "currentPassword": alice.password},
    )
    assert resp.status == 200, await resp.text()
    assert "currentPassword" not in (await resp.json())["settings"]
    assert await email_now() == "new@example.com"
