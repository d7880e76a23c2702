"""The store: one module per aggregate, all SQL lives here, on SQLite or PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from .audit import AuditStore
from .chat import ChatStore
from .chat_notices import ChatNoticeStore
from .engines import open_database
from .engines.sqlite import READ_TIMEOUT_MS
from .events import EventStore
from .hooks import HookStore
from .issues import IssueStore
from .keys import KeyStore
from .labels import LabelStore
from .leases import LeaseStore
from .milestones import MilestoneStore
from .notifications import NotificationStore
from .orgs import OrgStore
from .outbox import MailStore, OutboxStore
from .passkeys import PasskeyStore
from .protection import ProtectionStore
from .reactions import ReactionStore
from .releases import ReleaseStore
from .repos import RepoStore
from .reviews import ReviewStore
from .search import SearchStore
from .statuses import StatusStore
from .two_factor import TwoFactorStore
from .upkeep import UpkeepStore
from .users import UserStore


class Store:
    """The database and the per-aggregate stores over it."""

    def __init__(
        self,
        path: str | Path,
        read_timeout_ms: int = READ_TIMEOUT_MS,
        write_timeout_ms: int = 5000,
        url: str = "",
        pool_size: int = 10,
    ) -> None:
        # url names PostgreSQL; empty, the SQLite file at path
        self.db = open_database(url, Path(path), read_timeout_ms, write_timeout_ms, pool_size)
        self.users = UserStore(self.db)
        self.repos = RepoStore(self.db)
        self.orgs = OrgStore(self.db, grants_changed=self.repos.forget_audience)
        self.issues = IssueStore(self.db)
        self.milestones = MilestoneStore(self.db)
        self.labels = LabelStore(self.db)
        self.reactions = ReactionStore(self.db)
        self.releases = ReleaseStore(self.db)
        self.search = SearchStore(self.db)
        self.chat = ChatStore(self.db)
        self.chat_notices = ChatNoticeStore(self.db)
        self.outbox = OutboxStore(self.db)
        self.events = EventStore(self.db)
        self.hooks = HookStore(self.db)
        self.protection = ProtectionStore(self.db)
        self.statuses = StatusStore(self.db)
        self.reviews = ReviewStore(self.db)
        self.notifications = NotificationStore(self.db)
        self.mail = MailStore(self.db)
        self.upkeep = UpkeepStore(self.db)
        self.leases = LeaseStore(self.db)
        self.audit = AuditStore(self.db)
        self.keys = KeyStore(self.db)
        self.two_factor = TwoFactorStore(self.db, grants_changed=self.repos.forget_audience)
        # A passkey is a second factor too: adding or removing one tells the same listeners.
        self.passkeys = PasskeyStore(self.db, changed=self.two_factor.factors_changed)

    async def open(self) -> None:
        """Open connections and apply migrations."""
        await self.db.open()

    async def close(self) -> None:
        """Close every connection."""
        await self.db.close()
