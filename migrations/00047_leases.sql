-- +goose Up
-- One table of leases for every background role that runs on one replica at a time: the
-- reconciler of each provider, the alert evaluator, the rollup job, the body purge and the
-- retention. A row is held by its owner (one process's role, with a token per run where the
-- role is taken per run) until expires_at, renewed by its holder; a holder that stops
-- renewing, killed or cut off from the database, loses it once expires_at has passed.
-- token is the fencing counter: it grows by one each time another holding begins, so a
-- statement of a holder that lost its lease, matched on the token it held, changes nothing.
-- A released lease keeps its row (and its token) with expires_at at -infinity.
CREATE TABLE leases (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    token      bigint NOT NULL CHECK (token > 0),
    expires_at timestamptz NOT NULL
);

-- The reconcilers' progress stays where it was, without the lease columns it no longer
-- needs: how far the background runs have got, so a failed run is simply done again.
ALTER TABLE recon_leases RENAME TO recon_runs;
ALTER TABLE recon_runs RENAME CONSTRAINT recon_leases_pkey TO recon_runs_pkey;
INSERT INTO leases (name, owner, token, expires_at)
SELECT name, owner, 1, coalesce(lease_until, '-infinity') FROM recon_runs WHERE owner <> '';
ALTER TABLE recon_runs DROP COLUMN owner, DROP COLUMN lease_until;

INSERT INTO leases (name, owner, token, expires_at)
SELECT 'alerts', owner, 1, lease_until FROM alert_leases WHERE name = 'evaluator';
DROP TABLE alert_leases;

-- +goose Down
CREATE TABLE alert_leases (
    name        text PRIMARY KEY,
    owner       text NOT NULL,
    lease_until timestamptz NOT NULL
);
INSERT INTO alert_leases (name, owner, lease_until)
SELECT 'evaluator', owner, expires_at FROM leases WHERE name = 'alerts' AND expires_at > '-infinity';

ALTER TABLE recon_runs ADD COLUMN owner text NOT NULL DEFAULT '', ADD COLUMN lease_until timestamptz;
UPDATE recon_runs r SET owner = l.owner, lease_until = nullif(l.expires_at, '-infinity')
FROM leases l WHERE l.name = r.name;
ALTER TABLE recon_runs RENAME CONSTRAINT recon_runs_pkey TO recon_leases_pkey;
ALTER TABLE recon_runs RENAME TO recon_leases;

DROP TABLE leases;
