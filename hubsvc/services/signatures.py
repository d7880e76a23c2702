"""Signed commits: a good SSH signature by a key of the committer's own account is verified."""

from __future__ import annotations

from typing import Any, NamedTuple

from aiohttp import web

from ..git.files import REPO_FILES
from ..git.objects import Kept
from ..keys import STORE
from ..sshkeys import fingerprint_of
from ..sshsig import BadSignature, OtherSignature, verify

MAX_CHECKS = 100  # signatures checked per answer: a page's most commits


class Checked(NamedTuple):
    """What a commit's signature says by itself: its key's fingerprint, or why none."""

    fingerprint: str | None
    reason: str  # "" with a fingerprint; else "invalid" or "unknown_key"


# By commit oid: the object never changes, so neither does its signature's check; who
# holds the key is asked of the database on every answer, so a key removed shows at once.
CHECKED: Kept[str, Checked] = Kept(1 << 14)


def unsigned() -> dict[str, Any]:
    """The verification of a commit without a signature."""
    return {"verified": False, "reason": "unsigned", "signer": None}


def _check(signature: bytes, payload: bytes) -> Checked:
    try:
        return Checked(fingerprint_of(verify(signature, payload, "git")), "")
    except OtherSignature:
        # A PGP or X.509 signature, or a key kind no account may hold: no key here signs it.
        return Checked(None, "unknown_key")
    except BadSignature:
        return Checked(None, "invalid")


def _check_all(found: dict[str, tuple[bytes, bytes]], oids: list[str]) -> dict[str, Checked]:
    """Check the signatures found (in the git thread: the crypto is CPU work)."""
    checked = {}
    for oid in oids:
        split = found.get(oid)
        # A signed commit too big to read for its signature is not verified.
        checked[oid] = _check(*split) if split is not None else Checked(None, "invalid")
        CHECKED.put(oid, checked[oid])
    return checked


async def verifications(
    app: web.Application, repo_id: int, items: list[dict[str, Any]], signed: list[str]
) -> dict[str, dict[str, Any]]:
    """GitHub's verification of each item by oid (unsigned ones are not in signed)."""
    checked: dict[str, Checked] = {}
    for oid in signed:
        known = CHECKED.get(oid)
        if known is not None:
            checked[oid] = known
    # At most a page's worth of signatures is checked per answer (a page holds no more).
    todo = [oid for oid in signed if oid not in checked][:MAX_CHECKS]
    if todo:
        checked.update(
            await app[REPO_FILES].run(repo_id, lambda g: _check_all(g.signatures(todo), todo))
        )
    prints = sorted({c.fingerprint for c in checked.values() if c.fingerprint})
    holders = await app[STORE].keys.by_fingerprints(prints) if prints else {}
    answers = {}
    for item in items:
        if item["oid"] not in signed:
            answers[item["oid"]] = unsigned()
            continue
        check = checked.get(item["oid"], Checked(None, "invalid"))
        holder = holders.get(check.fingerprint or "")
        if check.fingerprint is None:
            reason = check.reason
        elif holder is None:
            reason = "unknown_key"
        elif holder["email"].casefold() != item["committer"]["email"].casefold():
            reason = "bad_email"
        else:
            answers[item["oid"]] = {
                "verified": True,
                "reason": "valid",
                "signer": holder["username"],
            }
            continue
        answers[item["oid"]] = {"verified": False, "reason": reason, "signer": None}
    return answers
