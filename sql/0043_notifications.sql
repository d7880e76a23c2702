-- The notifications inbox (issue 35). A subscription says who follows an issue or pull
-- request's thread and why (author, comment, assign, mention, ...), or that they
-- unsubscribed (subscribed = 0: a new mention or assignment subscribes them again) or
-- ignore it (ignored = 1: nothing at all). The inbox consumer of the event log writes
-- both, and one thread per person and issue, marked unread on each new event.
CREATE TABLE issue_subscriptions (
    issue_id   INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    subscribed INTEGER NOT NULL DEFAULT 1,
    ignored    INTEGER NOT NULL DEFAULT 0,
    reason     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (issue_id, user_id)
);
CREATE INDEX issue_subscriptions_user ON issue_subscriptions(user_id);

CREATE TABLE notification_threads (
    -- AUTOINCREMENT: a thread id in a link never names another person's thread later.
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    issue_id     INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    repo_id      INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    reason       TEXT NOT NULL,       -- why the latest event reached this person
    unread       INTEGER NOT NULL DEFAULT 1,
    updated_at   TEXT NOT NULL,       -- the latest event's time
    last_read_at TEXT,
    event_id     INTEGER NOT NULL,    -- the latest event (events are pruned: no key)
    comment_id   INTEGER,             -- its comment, if it was one (comments are deleted)
    UNIQUE (user_id, issue_id)
);
CREATE INDEX notification_threads_inbox ON notification_threads(user_id, updated_at);
CREATE INDEX notification_threads_issue ON notification_threads(issue_id);
CREATE INDEX notification_threads_repo ON notification_threads(repo_id);
