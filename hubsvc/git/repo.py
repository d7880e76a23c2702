"""A thin, blocking wrapper over one bare repository that returns plain data.

Small reads (refs, trees, blobs, one commit's diff) go through dulwich in-process,
which beats spawning git for them. A page of history is walked in-process near the
top, and deeper by the git CLI, which skips commits through the commit-graph without
parsing them; what a walk learnt is kept (walk.py), so a page read again, or the next
one, is dulwich reads again. Ranges (`commits_between`) run the git CLI.

One `GitRepo` keeps one dulwich `Repo` open. Its object store caches open packs
and rescans the pack directory whenever an object is missing, so a push landed by
another process is seen by an instance opened before it. dulwich does not promise
that this pack cache is thread-safe, so each instance serialises its dulwich calls
behind a lock and may be shared between `asyncio.to_thread` calls. Call `close()`
(or use `with`) to release the pack files.
"""

from __future__ import annotations

from .diffs import DiffMixin
from .history import HistoryMixin
from .merging import MergeMixin
from .ranges import RangeMixin
from .signatures import SignatureMixin
from .trees import TreeMixin


class GitRepo(HistoryMixin, DiffMixin, TreeMixin, MergeMixin, RangeMixin, SignatureMixin):
    """One bare repository on disk."""
