"""Open sockets' objects out of the cycle collector's view while they live, in steps.

CPython runs a full collection each time the objects that survived into its oldest
generation grow by a quarter; at 10,000 sockets (about 55 tracked objects each) one
pass walks half a million objects: 280-400 ms of CPU with the GIL held, paid by
whichever thread allocated last (the loop, or a database thread mid-query), and a
surge of connections (every client back after a restart) ran nine of them, 1.2-1.4
s in all. A socket's objects live as long as it does, so scanning them for garbage again
and again finds none.

So, as run.py does once at start, every FREEZE_EVERY sockets opened the process moves
what is tracked into the permanent generation (gc.freeze, a constant-time list move,
after a full pass over what is not frozen yet, so no garbage goes with it): later full
passes walk only what came since. A closed socket's cycles (about 28 objects) cannot be freed
there, so once the sockets closed since the last thaw reach a quarter of those open,
or FREEZE_EVERY, gc.unfreeze hands everything back and the next full pass frees them:
what waits is at most a quarter of the open sockets' worth of cycles, and churn costs
a full pass per quarter of the sockets replaced, as the quarter rule's own did.
"""

from __future__ import annotations

import gc

FREEZE_EVERY = 1000


class Collector:
    """Counts sockets opened and closed and freezes or thaws the collector's generations."""

    def __init__(self, every: int = FREEZE_EVERY) -> None:
        self.every = every
        self.enabled = False
        self.open = 0
        self.opened = 0  # since the last freeze
        self.closed = 0  # since the last thaw
        self.freezes = 0
        self.thaws = 0

    def enable(self) -> None:
        """From now on (run.py, once listening, after its own gc.freeze)."""
        self.enabled = True

    def opened_one(self) -> None:
        """A socket was opened: freeze once every `every` of them."""
        self.open += 1
        self.opened += 1
        if self.enabled and self.opened >= self.every:
            self.opened = 0
            # A full pass, not a young one: a cycle already in the oldest generation would
            # otherwise be frozen with the sockets until the next thaw. It walks only what
            # is not frozen, about `every` sockets' objects (tens of ms at 1,000).
            gc.collect()
            gc.freeze()
            self.freezes += 1

    def closed_one(self) -> None:
        """A socket was closed: thaw once enough closed that their cycles matter."""
        self.open = max(0, self.open - 1)
        self.closed += 1
        if self.enabled and self.closed >= max(self.every, self.open // 4):
            self.closed = 0
            gc.unfreeze()  # the next full pass frees the closed sockets' cycles
            self.thaws += 1


# One per process, as the collector is.
COLLECTOR = Collector()
