"""A thin, blocking wrapper over one bare repository that returns plain data.

Small reads (refs, trees, blobs, one commit's diff) go through dulwich in-process,
which beats spawning git for them. History walks (`commits`, `commits_between`)
run the git CLI: it stops after `--skip` + limit commits using the commit-graph,
where dulwich's walker parses every commit it passes.

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
from .trees import TreeMixin


class GitRepo(HistoryMixin, DiffMixin, TreeMixin, MergeMixin, RangeMixin):
    """One bare repository on disk."""
