"""A commit's signature and the bytes it signs, read from the commit object itself."""

from __future__ import annotations

from dulwich.objects import Commit, ObjectID

from .base import RepoBase, _locked
from .objects import Kept

# Whether a commit carries a gpgsig header, by oid: a page read again asks no object.
# An object never changes, so neither does the answer.
SIGNED: Kept[bytes, bool] = Kept(1 << 14)
MAX_SIGNED_COMMIT = 1 << 20  # a bigger signed commit is not read for its signature


def split_signature(raw: bytes) -> tuple[bytes, bytes] | None:
    """(signature, payload) of a raw commit object, or None when it has no gpgsig header.

    The payload is what git signed: the object with the gpgsig header and its
    continuation lines taken out (`git verify-commit` feeds the same bytes).
    """
    end = raw.find(b"\n\n")
    headers_end = len(raw) if end < 0 else end + 1
    if raw.startswith(b"gpgsig "):
        start = 0
    else:
        found = raw.find(b"\ngpgsig ", 0, headers_end)
        if found < 0:
            return None
        start = found + 1
    lines = []
    at = start
    while at < headers_end:
        stop = raw.find(b"\n", at, headers_end)
        stop = headers_end if stop < 0 else stop + 1
        line = raw[at:stop]
        if at != start and not line.startswith(b" "):
            break
        lines.append(line[len(b"gpgsig ") :] if at == start else line[1:])
        at = stop
    return b"".join(lines), raw[:start] + raw[at:]


def note_signed(commit: Commit) -> None:
    """Keep whether a commit parsed for another reason is signed (no second read)."""
    SIGNED.put(commit.id, commit.gpgsig is not None)


def signed_of_kept(oid: str) -> bool | None:
    """Whether a commit is signed, if already looked at (None: not yet)."""
    return SIGNED.get(oid.encode("ascii"))


def _has_signature(raw: bytes) -> bool:
    end = raw.find(b"\n\n")
    head = raw if end < 0 else raw[: end + 1]
    return head.startswith(b"gpgsig ") or b"\ngpgsig " in head


class SignatureMixin(RepoBase):
    """Which commits are signed, and their signatures."""

    @_locked
    def signed_of(self, oids: list[str]) -> list[str]:
        """The oids among these whose commits carry a signature (kept by oid)."""
        signed = []
        for oid in oids:
            key = oid.encode("ascii")
            known = SIGNED.get(key)
            if known is None:
                known = _has_signature(self._raw_commit(key, None) or b"")
                SIGNED.put(key, known)
            if known:
                signed.append(oid)
        return signed

    @_locked
    def signatures(self, oids: list[str]) -> dict[str, tuple[bytes, bytes]]:
        """(signature, payload) of each signed commit among oids."""
        found = {}
        for oid in oids:
            raw = self._raw_commit(oid.encode("ascii"), MAX_SIGNED_COMMIT)
            split = split_signature(raw) if raw is not None else None
            if split is not None:
                found[oid] = split
        return found

    def _raw_commit(self, oid: bytes, most: int | None) -> bytes | None:
        """The raw text of a commit object (None: missing, not a commit, or past most)."""
        try:
            type_num, raw = self._store.get_raw(ObjectID(oid))
        except KeyError:
            return None
        if type_num != 1 or (most is not None and len(raw) > most):
            return None
        return raw
