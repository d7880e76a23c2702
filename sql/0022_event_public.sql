-- Whether each event happened while its repository was public (GitHub's `public` flag):
-- events of a private period stay with those who could read the repository then, even
-- after it is made public. Events logged before this migration are taken as what their
-- repository is now (the best that is known of them).
ALTER TABLE events ADD COLUMN public INTEGER NOT NULL DEFAULT 1;
UPDATE events SET public = 0
 WHERE repo_id IN (SELECT id FROM repositories WHERE visibility = 'private');

-- The newest event a collaborator could not read: granted access reaches private-period
-- events logged after the grant, not the repository's private past before it.
ALTER TABLE collaborators ADD COLUMN since_event INTEGER NOT NULL DEFAULT 0;
