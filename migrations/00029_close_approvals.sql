-- +goose Up
-- Four-eyes approvals (ops rule 13). A tenant's own settings override the global ones; a
-- tenant without a row follows them. min_mode 'off' turns the amount threshold off for the
-- tenant, 'set' replaces it with min_cents; not_executed NULL follows the global setting.
CREATE TABLE tenant_approvals (
    tenant_id     bigint PRIMARY KEY REFERENCES tenants(id),
    min_mode      text NOT NULL DEFAULT 'default' CHECK (min_mode IN ('default', 'off', 'set')),
    min_cents     bigint CHECK (min_cents >= 0),
    not_executed  boolean,
    updated_at    timestamptz NOT NULL,
    CHECK ((min_mode = 'set') = (min_cents IS NOT NULL))
);

-- A person's close waiting for a second person. An open proposal past expires_at reads as
-- expired and is marked so when a newer one is made; the partial unique index keeps one
-- open proposal per operation.
CREATE TABLE close_proposals (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id  uuid NOT NULL REFERENCES operations(id),
    tenant_id     bigint NOT NULL REFERENCES tenants(id),
    kind          text NOT NULL CHECK (kind IN ('not_executed', 'manual')),
    to_status     text NOT NULL CHECK (to_status IN ('succeeded', 'failed')),
    provider_ref  text NOT NULL DEFAULT '',
    note          text NOT NULL,
    why           text NOT NULL DEFAULT '',
    proposed_by   text NOT NULL,
    proposed_at   timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    state         text NOT NULL DEFAULT 'open'
        CHECK (state IN ('open', 'approved', 'rejected', 'superseded', 'expired')),
    decided_by    text NOT NULL DEFAULT '',
    decided_at    timestamptz,
    outcome       text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX close_proposals_open_idx ON close_proposals (operation_id) WHERE state = 'open';
CREATE INDEX close_proposals_operation_idx ON close_proposals (operation_id, id);

-- +goose Down
DROP TABLE close_proposals;
DROP TABLE tenant_approvals;
