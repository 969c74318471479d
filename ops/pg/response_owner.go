package pg

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// responseOperationSQL finds the LLM call of a tenant whose attempt got ref from the
// provider, latest first. An attempt holds an id the provider named before it answered (a
// stream's first event, a background response's creation) on its own row, which
// attempts_provider_ref_idx finds. The id of a successful attempt's answer is on its
// operation only (transitionFin), found on operations_tenant_provider_ref_idx: that index
// leads with the tenant and then the provider, which the caller does not name, so the
// tenant's few providers are walked first, one index probe each (a loose index scan), and
// the record is looked for under each (OFFSET 0 keeps that a probe per provider instead of
// a read of every record of the tenant). An
// operation's record counts only when one of its attempts succeeded, so that a record a
// person or a lookup named, which no attempt got back, never opens another tenant's response
// to this one.
const responseOperationSQL = `
WITH RECURSIVE p(provider) AS (
	(SELECT provider FROM operations WHERE tenant_id = @tenant AND provider_ref <> '' ORDER BY provider LIMIT 1)
	UNION ALL
	SELECT (SELECT o.provider FROM operations o WHERE o.tenant_id = @tenant AND o.provider_ref <> '' AND o.provider > p.provider
		ORDER BY o.provider LIMIT 1)
	FROM p WHERE p.provider IS NOT NULL
)
SELECT id::text FROM (
	SELECT a.operation_id AS id, a.started_at AS at FROM attempts a JOIN operations o ON o.id = a.operation_id
	WHERE a.provider_ref = @ref AND a.provider_ref <> '' AND o.tenant_id = @tenant AND o.kind = 'llm_call'
	UNION ALL
	SELECT o.id, a.started_at FROM p
	CROSS JOIN LATERAL (SELECT o.id FROM operations o WHERE o.tenant_id = @tenant AND o.provider = p.provider
		AND o.provider_ref = @ref AND o.provider_ref <> '' AND o.kind = 'llm_call' OFFSET 0) o
	JOIN attempts a ON a.operation_id = o.id AND a.outcome = 'ok'
) owners ORDER BY at DESC LIMIT 1`

// ResponseOperation implements llm.ResponseOwners: the LLM call of the tenant one of whose
// attempts got ref from the provider, the latest when several did.
func (db *DB) ResponseOperation(ctx context.Context, tenantID int64, ref string) (string, error) {
	var id string
	err := db.Pool.QueryRow(ctx, responseOperationSQL, pgx.NamedArgs{"ref": ref, "tenant": tenantID}).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ops.Errorf(ops.ENOTFOUND, "No call of this tenant recorded %s.", ref)
	}
	return id, interpret(err, "find the operation of a response")
}

// responseItemsSQL reads which of @ids are output items of the tenant's responses through
// Settle, from the answers it keeps (operations.result of a succeeded call of the Responses
// API), on operations_response_items_idx (migration 00085): one index probe per id, whatever
// the number of the tenant's calls. Item ids are the provider's, unique across its account,
// so a probe finds a row or two, whose tenant is compared after (OFFSET 0 keeps the tenant
// out of the probe, which would otherwise read every call of a small tenant instead).
const responseItemsSQL = `
SELECT DISTINCT i FROM unnest(@ids::text[]) i
CROSS JOIN LATERAL (SELECT o.tenant_id, o.kind, o.status FROM operations o
	WHERE jsonb_path_query_array(o.result, '$.output[*].id') ? i AND o.api = 'responses' AND o.result IS NOT NULL
	OFFSET 0) o
WHERE o.tenant_id = @tenant AND o.kind = 'llm_call' AND o.status = 'succeeded'`

// ResponseOutputItems implements llm.ResponseItems: those of ids that are output items of a
// response the tenant's own calls through Settle created and whose answer Settle keeps.
func (db *DB) ResponseOutputItems(ctx context.Context, tenantID int64, ids []string) ([]string, error) {
	rows, err := db.Pool.Query(ctx, responseItemsSQL, pgx.NamedArgs{"tenant": tenantID, "ids": ids})
	if err != nil {
		return nil, interpret(err, "find the responses of output items")
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return found, interpret(err, "find the responses of output items")
}

// keptItemsSQL reads the output items of @ids as the answers Settle keeps of the tenant's
// succeeded Responses calls hold them, found as responseItemsSQL finds them, one row per
// answer that holds one.
const keptItemsSQL = `
SELECT i, item FROM unnest(@ids::text[]) i
CROSS JOIN LATERAL (SELECT o.tenant_id, o.kind, o.status, o.result FROM operations o
	WHERE jsonb_path_query_array(o.result, '$.output[*].id') ? i AND o.api = 'responses' AND o.result IS NOT NULL
	OFFSET 0) o
CROSS JOIN LATERAL jsonb_path_query(o.result, '$.output[*] ? (@.id == $id)', jsonb_build_object('id', i)) item
WHERE o.tenant_id = @tenant AND o.kind = 'llm_call' AND o.status = 'succeeded'`

// KeptOutputItems implements llm.ResponseItems: each of ids that is an output item of a
// response the tenant's own calls through Settle created, as the answer Settle keeps holds it.
func (db *DB) KeptOutputItems(ctx context.Context, tenantID int64, ids []string) (map[string][]json.RawMessage, error) {
	rows, err := db.Pool.Query(ctx, keptItemsSQL, pgx.NamedArgs{"tenant": tenantID, "ids": ids})
	if err != nil {
		return nil, interpret(err, "read the kept output items")
	}
	kept := map[string][]json.RawMessage{}
	var id string
	var item []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &item}, func() error {
		kept[id] = append(kept[id], json.RawMessage(slices.Clone(item)))
		return nil
	})
	return kept, interpret(err, "read the kept output items")
}
