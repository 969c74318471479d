-- +goose Up
-- Pipeline jobs. A job is one client intent (tenant + Idempotency-Key); its
-- expensive generation is a ledger operation of kind llm_job whose intent key is the job's
-- dedup key, so jobs with one computational input share one operation and one generation.
CREATE TABLE jobs (
    id                  uuid PRIMARY KEY,
    tenant_id           bigint NOT NULL REFERENCES tenants(id),
    idempotency_key     text NOT NULL,
    -- Hash of the body fields that make the intent; the same key with another is refused.
    request_fingerprint text NOT NULL,
    request_ref         text NOT NULL DEFAULT '',
    -- Hash of tenant, document hash, pipeline, prompt version and model profile.
    dedup_key           text NOT NULL,
    document_hash       text NOT NULL,
    document_ref        text NOT NULL DEFAULT '',
    document_text       text,
    pipeline            text NOT NULL,
    prompt_version      text NOT NULL,
    model_profile       text NOT NULL,
    status              text NOT NULL CHECK (status IN ('queued', 'running', 'published', 'unknown', 'failed')),
    -- The llm_job operation whose generation this job uses (its own or a shared one).
    operation_id        uuid REFERENCES operations(id),
    lease_owner         text NOT NULL DEFAULT '',
    lease_until         timestamptz,
    run_after           timestamptz NOT NULL,
    claims              integer NOT NULL DEFAULT 0,
    -- The retry budget: sends made for this job, what they cost (possibly), and the caps.
    llm_attempts        integer NOT NULL DEFAULT 0,
    possible_duplicates integer NOT NULL DEFAULT 0,
    cost_micros         bigint NOT NULL DEFAULT 0,
    max_attempts        integer NOT NULL,
    max_cost_micros     bigint NOT NULL DEFAULT 0,
    deadline            timestamptz NOT NULL,
    duplicate_posts     integer NOT NULL DEFAULT 0,
    result              jsonb,
    error_code          text NOT NULL DEFAULT '',
    error_message       text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    published_at        timestamptz,
    UNIQUE (tenant_id, idempotency_key),
    CHECK ((status = 'published') = (published_at IS NOT NULL))
);
-- What a worker may claim: queued rows that are due and running rows whose lease ran out.
CREATE INDEX jobs_runnable_idx ON jobs (run_after, created_at) WHERE status IN ('queued', 'running');
CREATE INDEX jobs_unknown_idx ON jobs (operation_id) WHERE status = 'unknown';
CREATE INDEX jobs_dedup_idx ON jobs (dedup_key);

-- One success per dedup key: at most one succeeded generation per computational input.
CREATE UNIQUE INDEX operations_job_one_success_idx ON operations (intent_key)
    WHERE kind = 'llm_job' AND status = 'succeeded';

-- Checkpoints uploaded → text_extracted → chunks_ready → llm_done → validated → published.
-- A stage's result is reused when the same input went through the same code version; a new
-- validator version therefore validates again without generating again.
CREATE TABLE job_checkpoints (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    bigint NOT NULL REFERENCES tenants(id),
    dedup_key    text NOT NULL,
    job_id       uuid NOT NULL REFERENCES jobs(id),
    stage        text NOT NULL CHECK (stage IN ('uploaded', 'text_extracted', 'chunks_ready', 'llm_done', 'validated', 'published')),
    input_hash   text NOT NULL,
    code_version text NOT NULL,
    status       text NOT NULL CHECK (status IN ('ok', 'failed', 'unknown')),
    attempt      integer NOT NULL DEFAULT 0,
    result       jsonb,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    UNIQUE (dedup_key, stage, input_hash, code_version)
);
CREATE INDEX job_checkpoints_job_idx ON job_checkpoints (job_id);

-- The jobs' own transactional outbox (ops rule 10), delivered to the job webhooks by a relay of
-- its own so that it never races the operations' relay for the same rows.
CREATE TABLE job_outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     uuid NOT NULL UNIQUE,
    topic        text NOT NULL,
    entity_id    text NOT NULL,
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    published_at timestamptz,
    locked_until timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT ''
);
CREATE INDEX job_outbox_unpublished_idx ON job_outbox (id) WHERE published_at IS NULL;
-- A job is published once: a second job.published row for it cannot exist.
CREATE UNIQUE INDEX job_outbox_one_publish_idx ON job_outbox (entity_id) WHERE topic = 'job.published';

-- A receiver's inbox: the events each consumer applied, so a redelivery is applied once.
CREATE TABLE consumed_events (
    consumer   text NOT NULL,
    event_id   text NOT NULL,
    topic      text NOT NULL DEFAULT '',
    entity_id  text NOT NULL DEFAULT '',
    payload    jsonb,
    applied_at timestamptz NOT NULL,
    PRIMARY KEY (consumer, event_id)
);

-- +goose Down
DROP TABLE consumed_events, job_outbox, job_checkpoints;
DROP INDEX operations_job_one_success_idx;
DROP TABLE jobs;
