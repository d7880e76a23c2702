"""Avatars: uploads decoded by Pillow, bounded, stored as PNG without metadata; identicons."""

from __future__ import annotations

import io
import os
import struct
import zlib

import aiohttp
from PIL import ExifTags, Image

from hubsvc.web.avatars import default_version

BASE = "http://127.0.0.1:8080"


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    """image saved as fmt, in memory."""
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def declaring(width: int, height: int) -> bytes:
    """A 1×1 PNG whose header claims width×height pixels (CRC fixed, so it parses)."""
    png = bytearray(encode(Image.new("L", (1, 1)), "PNG"))
    assert png[12:16] == b"IHDR"
    png[16:24] = struct.pack(">II", width, height)
    png[29:33] = struct.pack(">I", zlib.crc32(bytes(png[12:29])))
    return bytes(png)


async def upload(client, user, data: bytes, content_type: str = "image/png"):
    """PATCH the avatar as a raw body."""
    return await client.patch(
        "/api/users/me/avatar", data=data, headers={**user.headers, "Content-Type": content_type}
    )


async def served(client, resp) -> tuple[aiohttp.ClientResponse, bytes, Image.Image]:
    """The avatar a successful upload answered with, fetched and decoded."""
    assert resp.status == 200, await resp.text()
    url = (await resp.json())["user"]["avatarUrl"].removeprefix(BASE)
    got = await client.get(url)
    assert got.status == 200
    body = await got.read()
    image = Image.open(io.BytesIO(body))
    image.load()
    return got, body, image


async def test_png_is_stored_as_png_without_its_text_chunks(client, alice):
    from PIL.PngImagePlugin import PngInfo

    source = Image.new("RGBA", (64, 48), (10, 120, 200, 128))
    source.putpixel((3, 4), (255, 0, 0, 255))
    meta = PngInfo()
    meta.add_text("Comment", "secret note")
    resp = await upload(client, alice, encode(source, "PNG", pnginfo=meta))
    got, body, image = await served(client, resp)
    assert got.content_type == "image/png" and got.headers["X-Content-Type-Options"] == "nosniff"
    assert image.format == "PNG" and image.size == (64, 48)
    assert image.convert("RGBA").tobytes() == source.tobytes()  # lossless, alpha kept
    assert b"secret note" not in body and "Comment" not in image.info


async def test_jpeg_loses_its_exif_and_gps_but_keeps_its_rotation(client, alice):
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6  # stored sideways: shown turned 90° clockwise
    exif[ExifTags.Base.Make] = "SpyCam"
    exif[ExifTags.IFD.GPSInfo] = {
        ExifTags.GPS.GPSLatitudeRef: "N",
        ExifTags.GPS.GPSLatitude: (48.0, 51.0, 29.0),
        ExifTags.GPS.GPSLongitudeRef: "E",
        ExifTags.GPS.GPSLongitude: (2.0, 17.0, 40.0),
    }
    jpeg = encode(Image.new("RGB", (40, 20), (200, 30, 30)), "JPEG", exif=exif, quality=95)
    assert Image.open(io.BytesIO(jpeg)).getexif().get_ifd(ExifTags.IFD.GPSInfo)
    form = aiohttp.FormData()
    form.add_field("avatar", io.BytesIO(jpeg), filename="me.jpg", content_type="image/jpeg")
    resp = await client.patch("/api/users/me/avatar", data=form, headers=alice.headers)
    got, body, image = await served(client, resp)
    assert got.content_type == "image/png" and image.format == "PNG"
    assert image.size == (20, 40)  # the orientation was applied before EXIF went
    assert not image.getexif() and not image.getexif().get_ifd(ExifTags.IFD.GPSInfo)
    assert b"Exif" not in body and b"eXIf" not in body and b"SpyCam" not in body
    assert set(image.info) <= {"dpi"}  # no exif, icc_profile, text
    r, g, b = image.convert("RGB").getpixel((10, 20))
    assert r > 180 and g < 60 and b < 60


async def test_animated_gif_keeps_its_first_frame(client, alice):
    frames = [Image.new("P", (30, 30), 0) for _ in range(2)]
    for frame, colour in zip(frames, ((0, 200, 0), (0, 0, 200)), strict=True):
        frame.putpalette(colour + (255, 255, 255))
    gif = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert Image.open(io.BytesIO(gif)).n_frames == 2
    got, _, image = await served(client, await upload(client, alice, gif, "image/gif"))
    assert got.content_type == "image/png" and image.format == "PNG"
    assert getattr(image, "n_frames", 1) == 1
    assert image.convert("RGB").getpixel((15, 15)) == (0, 200, 0)


async def test_webp_and_large_images_are_scaled_to_fit(client, alice):
    webp = encode(Image.new("RGB", (1000, 500), (90, 90, 90)), "WEBP")
    got, _, image = await served(client, await upload(client, alice, webp, "image/webp"))
    assert got.content_type == "image/png" and image.size == (460, 230)


async def test_decompression_bombs_are_refused_by_their_header(client, alice):
    # A few KB of PNG that would be 25 megapixels decoded (our bound), and a header that
    # claims 10 gigapixels (Pillow's own bound fires first): both 422 naming the limit.
    small_file = encode(Image.new("1", (5000, 5000)), "PNG")
    assert len(small_file) < 10000
    for data, declared in ((small_file, "5000×5000"), (declaring(100000, 100000), "")):
        resp = await upload(client, alice, data)
        assert resp.status == 422, await resp.text()
        error = (await resp.json())["error"]
        assert error.startswith("avatar: larger than 4096×4096 pixels") and declared in error
    me = await (await client.get("/api/users/me", headers=alice.headers)).json()
    assert me["user"]["avatarUrl"].endswith("v=" + default_version("alice"))


async def test_not_images_and_broken_images_are_422(client, alice):
    noise = Image.frombytes("RGB", (64, 64), os.urandom(64 * 64 * 3))
    png = encode(noise, "PNG")
    jpeg = encode(noise, "JPEG")
    cases = [
        (b"just some text, not a picture", "not a PNG, JPEG, GIF or WebP image"),
        (b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>", "not a PNG"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "not a PNG"),  # the old magic-byte check's pass
        (encode(noise, "TIFF"), "not a PNG"),  # Pillow reads it; avatars don't
        (encode(noise, "BMP"), "not a PNG"),
        (png[: len(png) // 2], "truncated or corrupt"),
        (jpeg[: len(jpeg) // 2], "truncated or corrupt"),
    ]
    for data, reason in cases:
        resp = await upload(client, alice, data)
        assert resp.status == 422, (reason, await resp.text())
        assert reason in (await resp.json())["error"]
    me = await (await client.get("/api/users/me", headers=alice.headers)).json()
    assert me["user"]["avatarUrl"].endswith("v=" + default_version("alice"))


async def test_identicon_is_drawn_by_pillow_stable_and_cacheable(client, alice, bob):
    url = f"/api/users/alice/avatar?v={default_version('alice')}"
    first = await client.get(url)
    assert first.status == 200 and first.content_type == "image/png"
    assert "immutable" in first.headers["Cache-Control"]
    assert first.headers["ETag"] == f'"{default_version("alice")}"'
    body = await first.read()
    image = Image.open(io.BytesIO(body)).convert("RGB")
    assert image.size == (200, 200)
    assert image.transpose(Image.Transpose.FLIP_LEFT_RIGHT).tobytes() == image.tobytes()
    colours = {colour for _, colour in image.getcolors(16) or []}
    assert len(colours) <= 2 and (0xF0, 0xF0, 0xF0) in colours
    again = await client.get("/api/users/ALICE/avatar")
    assert await again.read() == body and again.headers["ETag"] == first.headers["ETag"]
    assert (await client.get(url, headers={"If-None-Match": first.headers["ETag"]})).status == 304
    other = await client.get("/api/users/bob/avatar")
    assert await other.read() != body
