-- Review requests (issue 35): people and teams asked to review a pull request, until
-- they review it or the request is withdrawn; and the protection rule's
-- requireCodeOwnerReviews (an approval from an owner of each changed path, CODEOWNERS).
CREATE TABLE review_requests (
    issue_id     BIGINT NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    user_id      BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    requested_by BIGINT,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (issue_id, user_id)
);
CREATE INDEX review_requests_user ON review_requests(user_id);
CREATE TABLE team_review_requests (
    issue_id     BIGINT NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    team_id      BIGINT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    requested_by BIGINT,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (issue_id, team_id)
);
CREATE INDEX team_review_requests_team ON team_review_requests(team_id);
ALTER TABLE branch_protections ADD COLUMN code_owner_reviews BIGINT NOT NULL DEFAULT 0;
