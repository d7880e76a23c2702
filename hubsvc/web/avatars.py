"""Avatar images: uploads decoded and re-encoded by Pillow, and the generated default."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections import OrderedDict

from PIL import Image, ImageOps

# Generated avatars kept in memory: one costs about 1 ms of CPU and never changes for a
# username (its version is derived from it). 2,000 PNGs of about 100 bytes each.
IDENTICON_CACHE = 2000

# What an upload may declare before anything is decoded (Gitea's AVATAR_MAX_WIDTH and
# _HEIGHT): a 4096×4096 RGBA image is 64 MiB in memory, the most one upload may cost.
MAX_SIDE = 4096
# What is stored and served: a larger image is scaled down to fit (GitHub's avatars are
# 460 pixels), so a stored avatar is at most about 1 MiB of PNG whatever was uploaded.
STORED_SIDE = 460
# Only these decoders see uploaded bytes: Pillow also reads formats such as EPS (through
# Ghostscript), PSD or TIFF, whose parsers an avatar has no reason to reach.
FORMATS = ("PNG", "JPEG", "GIF", "WEBP")


class BadImage(ValueError):
    """An upload that is not an avatar we accept; the message says why."""


def normalize(data: bytes) -> bytes:
    """The upload as a PNG without metadata, at most STORED_SIDE pixels a side."""
    try:
        image = Image.open(io.BytesIO(data), formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        # Pillow's own bound (89 megapixels warns, 179 refuses) fires before ours can
        # look; the warning arrives as an exception where warnings are errors (the tests).
        raise BadImage(f"larger than {MAX_SIDE}×{MAX_SIDE} pixels") from None
    except Exception:  # Pillow's parsers raise many kinds on hostile bytes: all mean "not one"
        raise BadImage("not a PNG, JPEG, GIF or WebP image") from None
    with image:
        width, height = image.size
        if width > MAX_SIDE or height > MAX_SIDE:
            raise BadImage(
                f"larger than {MAX_SIDE}×{MAX_SIDE} pixels (this one declares {width}×{height})"
            )
        if width < 1 or height < 1:
            raise BadImage("the image has no pixels")
        try:
            # An animated GIF or WebP keeps its first frame (what open() positions on).
            image.draft("RGB", (STORED_SIDE, STORED_SIDE))  # JPEG: decode at a smaller scale
            image.load()
            # Phones record rotation in EXIF: apply it before EXIF goes.
            upright = ImageOps.exif_transpose(image)
            upright.thumbnail((STORED_SIDE, STORED_SIDE), Image.Resampling.LANCZOS)
            pixels = upright.convert("RGBA" if upright.has_transparency_data else "RGB")
        except Exception:  # OSError when truncated; SyntaxError, ValueError, … when corrupt
            raise BadImage("the image data is truncated or corrupt") from None
    # A fresh image from the pixels alone: no EXIF, GPS, ICC profile, text or comments.
    clean = Image.frombytes(pixels.mode, pixels.size, pixels.tobytes())
    out = io.BytesIO()
    clean.save(out, "PNG", optimize=True)
    return out.getvalue()


async def accept_upload(data: bytes) -> bytes:
    """normalize(data) in a thread: decoding a large image takes tens of milliseconds."""
    return await asyncio.to_thread(normalize, data)


def identicon(seed: str, cells: int = 5, scale: int = 40) -> bytes:
    """A symmetric 5x5 identicon PNG derived from seed, like GitHub's default avatars."""
    digest = hashlib.sha256(seed.encode()).digest()
    colour = (digest[0] // 2 + 64, digest[1] // 2 + 64, digest[2] // 2 + 64)
    half = (cells + 1) // 2
    grid = Image.new("P", (cells, cells), 0)
    grid.putpalette((0xF0, 0xF0, 0xF0, *colour))  # index 0: background, 1: colour
    for row in range(cells):
        for col in range(half):
            if digest[3 + row * half + col] % 2 == 0:
                grid.putpixel((col, row), 1)
                grid.putpixel((cells - 1 - col, row), 1)
    image = grid.resize((cells * scale, cells * scale), Image.Resampling.NEAREST)
    out = io.BytesIO()
    image.save(out, "PNG", optimize=True)
    return out.getvalue()


def default_version(username: str) -> str:
    """The `v` of a generated avatar: it changes only if the generator's seed does."""
    return "g" + hashlib.sha256(("identicon:" + username.lower()).encode()).hexdigest()[:12]


_drawn: OrderedDict[str, bytes] = OrderedDict()


async def default_avatar(username: str) -> bytes:
    """The identicon of a username: from memory, else drawn in a thread and kept."""
    key = username.lower()
    body = _drawn.get(key)
    if body is not None:
        _drawn.move_to_end(key)
        return body
    body = await asyncio.to_thread(identicon, key)
    _drawn[key] = body
    while len(_drawn) > IDENTICON_CACHE:
        _drawn.popitem(last=False)
    return body
