-- Scopes of personal access tokens, as GitHub's fine-grained and Gitea's scoped tokens:
-- a JSON list of "area:read|write" (and "admin"); NULL, as every token made before this,
-- means every scope its owner has. repositories: a JSON list of "owner/name" the token is
-- limited to; NULL means all the owner may reach.
ALTER TABLE personal_tokens ADD COLUMN scopes TEXT;
ALTER TABLE personal_tokens ADD COLUMN repositories TEXT;
