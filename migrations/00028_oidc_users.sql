-- +goose Up
-- A user who signs in through an OpenID Connect provider is keyed by the provider's issuer
-- and its subject, which never change, rather than by email, which a provider may let a
-- person edit. Such a user has no password: a NULL hash never matches one.
ALTER TABLE users ALTER COLUMN password_hash DROP NOT NULL;
ALTER TABLE users
    ADD COLUMN oidc_issuer text,
    ADD COLUMN oidc_subject text,
    ADD CONSTRAINT users_oidc_identity_check CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));
CREATE UNIQUE INDEX users_oidc_identity_idx ON users (oidc_issuer, oidc_subject)
    WHERE oidc_subject IS NOT NULL;

-- +goose Down
DROP INDEX users_oidc_identity_idx;
ALTER TABLE users
    DROP CONSTRAINT users_oidc_identity_check,
    DROP COLUMN oidc_subject,
    DROP COLUMN oidc_issuer;
-- An empty hash matches no password, as NULL did.
UPDATE users SET password_hash = '' WHERE password_hash IS NULL;
ALTER TABLE users ALTER COLUMN password_hash SET NOT NULL;
