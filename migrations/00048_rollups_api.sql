-- +goose Up
-- The API an LLM operation called, as a label: chat_completions, responses, messages or
-- embeddings; '' for an operation that calls no such API (a refund). The gateway's stored
-- request names it, but the body purge deletes that request a week or so after the call, so
-- the operation keeps its API in a column of its own, written when it is opened, and the
-- rollups count by it: a minute recounted after the purge (a late close, a charge found
-- late) still splits its calls by API.
ALTER TABLE operations ADD COLUMN api text NOT NULL DEFAULT '';
-- Existing LLM operations take the API their stored request names. A job's generation is a
-- chat completion, and so is a call whose request names no route (it was sent before the
-- gateway served other APIs) or was purged: until the release that added Responses,
-- Messages and embeddings, chat completions were the only API an llm_call could call.
UPDATE operations SET api = coalesce(replace(regexp_replace(request->>'route', '^/v1/', ''), '/', '_'), 'chat_completions')
WHERE kind IN ('llm_call', 'llm_job');

-- The rollups split by API too: one row per width, start, tenant, kind, provider and API.
ALTER TABLE rollups ADD COLUMN api text NOT NULL DEFAULT '';
ALTER TABLE rollup_money ADD COLUMN api text NOT NULL DEFAULT '';
-- The rows computed before this migration cannot be split again, since their raw rows may
-- be gone: each takes one API whole. Refunds and rows of no operation (a refused request)
-- call none; a job's generation is a chat completion. An llm_call row takes the API every
-- llm_call of its tenant and provider created in the row's hour called, when they all
-- called one (a deployment that used one API, the usual case before this release);
-- otherwise (several APIs in that hour, or no operation of it left after the retention) it
-- takes the default, chat_completions, the API of every llm_call before the release that
-- added the others. The rows of one hour at every width (minute, quarter hour, hour) take
-- the same API, so each level is still the sum of the one below it.
UPDATE rollups r SET api = CASE WHEN r.kind = 'llm_job' THEN 'chat_completions' ELSE coalesce((
    SELECT min(o.api) FROM operations o
    WHERE o.tenant_id = r.tenant_id AND o.kind = 'llm_call' AND o.provider = r.provider
        AND o.created_at >= date_bin('1 hour', r.start, '2000-01-01 00:00:00+00'::timestamptz)
        AND o.created_at < date_bin('1 hour', r.start, '2000-01-01 00:00:00+00'::timestamptz) + interval '1 hour'
    HAVING count(DISTINCT o.api) = 1), 'chat_completions') END
WHERE r.kind IN ('llm_call', 'llm_job') AND r.provider <> '';
UPDATE rollup_money r SET api = CASE WHEN r.kind = 'llm_job' THEN 'chat_completions' ELSE coalesce((
    SELECT min(o.api) FROM operations o
    WHERE o.tenant_id = r.tenant_id AND o.kind = 'llm_call' AND o.provider = r.provider
        AND o.created_at >= date_bin('1 hour', r.start, '2000-01-01 00:00:00+00'::timestamptz)
        AND o.created_at < date_bin('1 hour', r.start, '2000-01-01 00:00:00+00'::timestamptz) + interval '1 hour'
    HAVING count(DISTINCT o.api) = 1), 'chat_completions') END
WHERE r.kind IN ('llm_call', 'llm_job') AND r.provider <> '';
ALTER TABLE rollups DROP CONSTRAINT rollups_pkey, ADD PRIMARY KEY (width_seconds, start, tenant_id, kind, provider, api);
ALTER TABLE rollup_money DROP CONSTRAINT rollup_money_pkey,
    ADD PRIMARY KEY (width_seconds, start, tenant_id, kind, provider, api, measure, currency);

-- +goose Down
-- The rows of one width, start, tenant, kind and provider are added up again into one.
CREATE TEMP TABLE rollups_merged ON COMMIT DROP AS
SELECT width_seconds, start, tenant_id, kind, provider, sum(client_requests)::bigint AS client_requests,
    sum(duplicates)::bigint AS duplicates, sum(replays)::bigint AS replays,
    sum(answered_in_progress)::bigint AS answered_in_progress, sum(answered_conflict)::bigint AS answered_conflict,
    sum(answered_checking)::bigint AS answered_checking, sum(answered_rejected)::bigint AS answered_rejected,
    sum(operations)::bigint AS operations, sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed,
    sum(unknown)::bigint AS unknown, sum(expired)::bigint AS expired, sum(attempts)::bigint AS attempts,
    sum(attempts_sent)::bigint AS attempts_sent, sum(timeouts)::bigint AS timeouts, sum(charges)::bigint AS charges,
    sum(orphans)::bigint AS orphans, sum(double_charges)::bigint AS double_charges, max(computed_at) AS computed_at
FROM rollups GROUP BY 1, 2, 3, 4, 5;
CREATE TEMP TABLE rollup_money_merged ON COMMIT DROP AS
SELECT width_seconds, start, tenant_id, kind, provider, measure, currency, sum(micros)::bigint AS micros
FROM rollup_money GROUP BY 1, 2, 3, 4, 5, 6, 7;
DELETE FROM rollups;
DELETE FROM rollup_money;
ALTER TABLE rollups DROP COLUMN api;
ALTER TABLE rollup_money DROP COLUMN api;
ALTER TABLE rollups ADD PRIMARY KEY (width_seconds, start, tenant_id, kind, provider);
ALTER TABLE rollup_money ADD PRIMARY KEY (width_seconds, start, tenant_id, kind, provider, measure, currency);
INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, client_requests, duplicates, replays,
    answered_in_progress, answered_conflict, answered_checking, answered_rejected, operations, succeeded, failed,
    unknown, expired, attempts, attempts_sent, timeouts, charges, orphans, double_charges, computed_at)
SELECT width_seconds, start, tenant_id, kind, provider, client_requests, duplicates, replays,
    answered_in_progress, answered_conflict, answered_checking, answered_rejected, operations, succeeded, failed,
    unknown, expired, attempts, attempts_sent, timeouts, charges, orphans, double_charges, computed_at
FROM rollups_merged;
INSERT INTO rollup_money (width_seconds, start, tenant_id, kind, provider, measure, currency, micros)
SELECT width_seconds, start, tenant_id, kind, provider, measure, currency, micros FROM rollup_money_merged;
ALTER TABLE operations DROP COLUMN api;
