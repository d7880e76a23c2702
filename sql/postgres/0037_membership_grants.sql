-- PostgreSQL twin of sql/0037_membership_grants.sql (BIGINT, as its integers are).
-- Issue 30, finding 1: a member who creates an organization's repository (or forks into
-- the organization) is its admin as on GitHub, but only while a member: the grant ends
-- with the membership. Until now it was a plain collaborator grant that outlived it, so
-- a removed member kept admin (push, hooks, reads).
ALTER TABLE collaborators ADD COLUMN with_membership BIGINT NOT NULL DEFAULT 0;

-- The creation grants already written, told apart from collaborators added by hand:
-- they were inserted in the repository's own transaction (created_at is the
-- repository's, to the second) with since_event 0, on an organization's repository.
-- A collaborator added through the API takes the newest event id, which is 0 only on an
-- install that never had a single event, and could share the second only then too.
UPDATE collaborators SET with_membership = 1
 WHERE since_event = 0
   AND EXISTS (SELECT 1 FROM repositories r JOIN users o ON o.id = r.owner_id
                WHERE r.id = collaborators.repo_id AND o.is_org = 1
                  AND r.created_at = collaborators.created_at);

-- Those of people who are no longer members end now.
DELETE FROM collaborators
 WHERE with_membership = 1
   AND NOT EXISTS (SELECT 1 FROM repositories r JOIN org_members m ON m.org_id = r.owner_id
                    WHERE r.id = collaborators.repo_id AND m.user_id = collaborators.user_id);
