"""The delivery queues' one state machine: claim, settle the abandoned, record, back off.

Three tables hold deliveries: `webhook_deliveries` (the chat webhook's outbox),
`hook_deliveries` (repository hooks) and `mail_deliveries`. A row is `pending` until it
is `delivered` or `failed`; `claimed_by` names the process sending it right now. A
claim is taken only on an unclaimed pending row, so two processes never send one row
at once; a claim whose process is gone (no live heartbeat, store/leases.py) is released
with one attempt counted, since that send may have arrived (at least once); an outcome
is written only while its sender's claim still stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..timeutil import now_iso
from .leases import IN_DOUBT, fence, gone


def backoff(attempts: int, base: float, cap: float) -> float:
    """Seconds before the next try: base doubled per attempt made (1, 2, …), at most cap."""
    return min(cap, base * 2 ** (attempts - 1))


@dataclass(frozen=True)
class DeliveryQueue:
    """The claim/settle/record statements of one delivery table.

    fenced: a claim needs the lease its sender works under (webhook and hook deliveries go
    out in order from the lease holder only, and a claim made under a lease that moved
    would interleave with the new holder's). Mail is not fenced, on purpose: the process
    that queues a message tries it at once (a verification e-mail does not wait for the
    holder's loop), whichever process that is; the claim alone keeps two from sending it.
    cleared: columns emptied once a row is settled (delivered or failed): mail's body.
    """

    table: str
    fenced: bool
    cleared: tuple[str, ...] = ()

    def claim(
        self, conn: Any, row_id: int, holder: str, lease: str | None = None, now: float = 0.0
    ) -> bool:
        """Mark a pending row as being sent by holder; False when another process has it.

        Fenced queues raise LeaseLost unless holder holds lease at now.
        """
        if self.fenced:
            if lease is None:
                raise ValueError(f"{self.table} claims are fenced: a lease is needed")
            fence(conn, lease, holder, now)
        return (
            conn.execute(
                f"UPDATE {self.table} SET claimed_by = ? WHERE id = ? AND status = 'pending'"
                " AND claimed_by IS NULL RETURNING id",
                (holder, row_id),
            ).fetchone()
            is not None
        )

    def settle_abandoned(
        self, conn: Any, now: float, mine: str | None = None, where: str = "", args: tuple = ()
    ) -> int:
        """Release rows claimed by a process that is gone (or by mine, which gave up on its
        sends mid-way), one attempt counted; where/args narrow the rows (`AND …`)."""
        also = " OR claimed_by = ?" if mine is not None else ""
        return int(
            conn.execute(
                f"UPDATE {self.table} SET attempts = attempts + 1, last_error = ?,"
                f" claimed_by = NULL WHERE status = 'pending'{where} AND claimed_by IS NOT NULL"
                f" AND ({gone(self.table + '.claimed_by')}{also})",
                (IN_DOUBT, *args, now) + ((mine,) if mine is not None else ()),
            ).rowcount
        )

    def record(
        self,
        conn: Any,
        row_id: int,
        *,
        outcome: str,
        error: str | None,
        retry_at: float | None,
        holder: str | None,
        extra: dict[str, Any] | None = None,
    ) -> bool:
        """One attempt's outcome (pending again at retry_at, delivered or failed), and the
        table's own columns in extra; whether it was written.

        With holder, only while holder's claim stands (it was not settled as abandoned).
        """
        extra = extra or {}
        sets = "".join(f", {column} = ?" for column in extra)
        sets += "".join(
            f", {column} = CASE WHEN ? = 'pending' THEN {column} END" for column in self.cleared
        )
        mine = " AND claimed_by = ?" if holder is not None else ""
        return (
            conn.execute(
                f"UPDATE {self.table} SET attempts = attempts + 1, status = ?, last_error = ?,"
                " claimed_by = NULL, next_attempt_at = COALESCE(?, next_attempt_at),"
                " delivered_at = CASE WHEN ? = 'delivered' THEN ? ELSE delivered_at END"
                f"{sets} WHERE id = ?{mine} RETURNING id",
                (outcome, error, retry_at, outcome, now_iso(), *extra.values())
                + (outcome,) * len(self.cleared)
                + (row_id,)
                + ((holder,) if holder is not None else ()),
            ).fetchone()
            is not None
        )


WEBHOOKS = DeliveryQueue("webhook_deliveries", fenced=True)
HOOKS = DeliveryQueue("hook_deliveries", fenced=True)
MAIL = DeliveryQueue("mail_deliveries", fenced=False, cleared=("message",))
