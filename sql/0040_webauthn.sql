-- Passkeys and security keys (WebAuthn) as a second factor (issue 32, item 2).
-- A registered credential: its id and public key as the authenticator made them, and
-- the signature counter it last reported (a cloned key shows a counter that goes back).
CREATE TABLE webauthn_credentials (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    credential_id BLOB NOT NULL UNIQUE,
    public_key    BLOB NOT NULL,
    sign_count    INTEGER NOT NULL DEFAULT 0,
    name          TEXT NOT NULL,
    transports    TEXT NOT NULL DEFAULT '[]',
    created_at    TEXT NOT NULL,
    last_used_at  TEXT
);
CREATE INDEX webauthn_credentials_user ON webauthn_credentials(user_id);
-- The random challenge of a ceremony in progress, in the database so that any process
-- can finish what another began; deleted when used (single use) or once expired.
-- bound: for a sign-in, the digest of the password step's challenge it continues
-- (empty for a registration, which the signed-in user finishes).
CREATE TABLE webauthn_challenges (
    challenge  BLOB PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL,
    bound      BLOB NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges(expires_at);
-- A user's open ceremonies (the oldest beyond a few go; a deleted user's go with them).
CREATE INDEX webauthn_challenges_user ON webauthn_challenges(user_id, purpose, bound);
