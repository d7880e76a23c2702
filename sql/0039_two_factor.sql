-- Issue 32: a second factor. A user's TOTP secret (Fernet-encrypted with a key derived
-- from [security] secret_key, so a copy of the database alone does not give the codes),
-- whether its enrolment was confirmed, and the last time step accepted: a code is taken
-- once, across processes, by moving last_step forward in one statement.
CREATE TABLE two_factor (
    user_id      INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    secret       BLOB NOT NULL,
    confirmed    INTEGER NOT NULL DEFAULT 0,
    last_step    INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    confirmed_at TEXT
);

-- Recovery codes, by their keyed digest; used_at set once, by the one statement that wins.
CREATE TABLE recovery_codes (
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    hash    BLOB NOT NULL,
    used_at TEXT,
    PRIMARY KEY (user_id, hash)
);

-- A password accepted, a second factor still owed: the challenge's digest (the challenge
-- itself is a bearer secret for five minutes), single use, dropped after a few wrong codes.
CREATE TABLE sign_in_challenges (
    hash       BLOB PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    expires_at INTEGER NOT NULL,
    failures   INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE INDEX sign_in_challenges_expiry ON sign_in_challenges(expires_at);
CREATE INDEX sign_in_challenges_user ON sign_in_challenges(user_id);

-- Organizations that require a second factor of their members and collaborators.
CREATE TABLE org_two_factor_rule (
    org_id     INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL
);
