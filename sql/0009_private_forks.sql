-- A fork of a private repository holds private work: it stays private for good (as on
-- GitHub), whatever later happens to the repository it came from.
ALTER TABLE repositories ADD COLUMN private_lineage INTEGER NOT NULL DEFAULT 0;
UPDATE repositories SET private_lineage = 1
 WHERE parent_id IN (SELECT id FROM repositories WHERE visibility = 'private');
