-- +goose Up
-- Four-eyes tells people apart by their dashboard account, never by the email an account
-- shows (ops rule 13), so a proposal names its proposer's account. A proposal made before
-- names only an email: it is matched to the account that holds that email (emails are
-- unique among accounts and never change); one that matches none keeps no account and
-- cannot be approved.
ALTER TABLE close_proposals ADD COLUMN proposed_by_user bigint REFERENCES users(id);
UPDATE close_proposals p SET proposed_by_user = u.id FROM users u WHERE lower(u.email) = lower(p.proposed_by);

-- +goose Down
ALTER TABLE close_proposals DROP COLUMN proposed_by_user;
