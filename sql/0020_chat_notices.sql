-- Direct messages owed to linked chat accounts (notifications.chat): an issue or pull
-- request assigned to the user, or an @mention. The chat-notify consumer of the event log
-- writes them in the transaction that moves its cursor; the bot reads them with
-- GET /api/chat/notifications and deletes them by acknowledging, in id order.
CREATE TABLE chat_notices (
    -- AUTOINCREMENT: never reused, so "acknowledged through id N" means the same rows
    -- however many were deleted meanwhile.
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    event_id   INTEGER NOT NULL,             -- events are pruned: no foreign key
    repo_id    INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    type       TEXT NOT NULL,                -- the event's: 'issue' or 'pull_request'
    number     INTEGER NOT NULL,
    title      TEXT NOT NULL,                -- as it was when the event happened
    reason     TEXT NOT NULL,                -- "you were assigned issue #3"
    actor      TEXT,                         -- the username of whoever did it
    created_at TEXT NOT NULL,                -- the event's time
    UNIQUE (event_id, user_id)               -- one notice per person per event
);
CREATE INDEX chat_notices_user ON chat_notices(user_id);
CREATE INDEX chat_notices_repo ON chat_notices(repo_id);
