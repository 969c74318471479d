package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// The parts of Transition's one statement. up is the compare-and-set on the operation's
// version, status and lease; every other part writes only when up changed a row: the
// attempt's finish (fin), the evidence (ev), the audit row (aud; left out where fin holds
// the audit entry, finishAudited),
// the outbox event of a status change that a consumer is registered for (ob), the provider
// charge of a success (ch) and the client request's answer (cr). A close that carries an
// approval applies only while its proposal is open and marks it approved; any other close to
// a final status marks the operation's open proposal superseded (pr). A result is not
// written onto an operation whose bodies the purge deleted: the purge went past the key's
// TTL and SETTLE_LLM_BODY_KEEP, so a completion found later is already past its time too,
// and the purge, which never looks at a purged row again, would leave it for good.
const (
	transitionUpRow = `
WITH up AS (
	UPDATE operations o SET status = @to, phase = @phase, version = version + 1, updated_at = @now,
		lease_until = CASE WHEN @to = 'in_progress' THEN coalesce(@lease::timestamptz, @now::timestamptz) END,
		provider_ref = CASE WHEN @res_ref = '' THEN provider_ref ELSE @res_ref END,
		provider_request_id = CASE WHEN @res_prid <> '' THEN @res_prid WHEN @prid <> '' THEN @prid ELSE provider_request_id END,
		result = CASE WHEN o.purged_at IS NULL THEN coalesce(@res_body::jsonb, result) END,
		stream_events = CASE WHEN o.purged_at IS NULL THEN coalesce(@res_events::json, stream_events) END,
		usage = coalesce(@res_usage::jsonb, usage),
		cost_micros = cost_micros + @res_cost,
		key_waits = key_waits + CASE WHEN @outcome::text = 'key_in_use' THEN 1 ELSE 0 END,
		closed_at = CASE WHEN @final THEN @now::timestamptz END,
		closed_by = CASE WHEN @final THEN @actor ELSE '' END
	WHERE id = @id AND version = @version AND status = @from
		AND (@owner = '' OR lease_owner = @owner)
		AND (NOT @require_expired OR lease_until IS NULL OR lease_until <= @now)
		AND (@pid::bigint = 0 OR EXISTS (SELECT 1 FROM close_proposals cp
			WHERE cp.id = @pid AND cp.operation_id = o.id AND cp.state = 'open' AND cp.expires_at > @now))
	RETURNING ` + opCols + `
)`
	transitionPr = `, pr AS (
	UPDATE close_proposals cp SET decided_at = @now,
		state = CASE WHEN cp.id = @pid THEN 'approved' ELSE 'superseded' END,
		decided_by = CASE WHEN cp.id = @pid THEN @approved_by ELSE @actor END,
		outcome = CASE WHEN cp.id = @pid THEN '' ELSE 'closed as ' || up.status || ' by ' || @actor END
	FROM up WHERE cp.operation_id = up.id::uuid AND cp.state = 'open' AND cp.expires_at > @now
)`
	// fin writes no column an index of attempts holds (possible_duplicate stays false on a
	// send that followed no uncertain one), and the partitions of attempts leave room on each
	// page for the grown row (migration 00072), so a finish is a heap-only update: no index
	// takes an entry. What a successful attempt's answer brings that its operation keeps
	// (up) goes there only: the provider's id of the answer, which AttemptRefSQL reads for
	// the attempt (an attempt keeps on its own row only an id the provider named before it
	// answered, a stream's first event), and a call's usage record when it is the
	// operation's, which the readers of an attempt's usage take from the operation
	// (SentPrompts); a row three times its size would not fit the room left for it.
	transitionFin = `, fin AS (
	UPDATE attempts SET finished_at = @fat, outcome = @outcome, http_status = @http_status,
		provider_request_id = @prid, error_code = @ecode, cost_micros = @a_cost::bigint, possible_duplicate = @a_dup,
		usage = CASE WHEN @outcome::text = 'ok' AND @a_usage::jsonb = @res_usage::jsonb THEN NULL ELSE @a_usage::jsonb END
	WHERE id = @aid AND EXISTS (SELECT 1 FROM up)
		AND started_at BETWEEN coalesce(@astart::timestamptz - interval '1 millisecond', '-infinity')
			AND coalesce(@astart::timestamptz + interval '1 millisecond', 'infinity')
)`
	// transitionFinAudit is what fin adds when the finish is its own audit entry
	// (finishAudited): the entry's id, taken from audit_log's sequence so that it sorts
	// among the operation's audit rows as a row would and never equals one, what the
	// operation became, and who finished the attempt when that was not its owner. None of
	// these columns is indexed.
	transitionFinAudit = `, audit_id = nextval('audit_log_id_seq'), op_status = (SELECT status FROM up),
		op_version = (SELECT version FROM up), op_phase = (SELECT phase FROM up), finished_by = nullif(@actor, owner)
	WHERE`
	transitionEv = `, ev AS (
	INSERT INTO evidence (operation_id, kind, provider_ref, summary, data, recorded_by, recorded_at)
	SELECT id::uuid, @ev_kind, @ev_ref, @ev_summary, @ev_data, @ev_by, @ev_at FROM up
	RETURNING id
)`
	// transitionAud names the evidence as evidenceID says: ev's row or none.
	transitionAud = `, aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason, evidence_id)
	SELECT @now, @actor, @action, 'operation', up.id,
		jsonb_build_object('status', @from::text, 'version', @version::bigint),
		jsonb_build_object('status', up.status, 'version', up.version, 'phase', up.phase) || @approval::jsonb,
		@reason, %s
	FROM up
)`
	transitionOb = `, ob AS (
	INSERT INTO outbox (event_id, topic, entity_id, payload, created_at)
	SELECT @event_id::uuid, 'operation.' || up.status, up.id, jsonb_build_object(
		'event_id', @event_id::text, 'operation_id', up.id, 'tenant_id', up.tenant_id, 'kind', up.kind,
		'status', up.status, 'previous_status', @from::text, 'version', up.version, 'provider_ref', up.provider_ref,
		'actor', @actor::text, 'at', @now::timestamptz) || @approval::jsonb, @now
	FROM up WHERE ` + outboxConsumed + `
)`
	transitionCh = `, ch AS (
	INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, charged_at, seen_at)
	SELECT up.tenant_id, up.provider, @res_ref, up.id::uuid, up.amount_cents, up.currency, 'succeeded', @now, @now
	FROM up
	ON CONFLICT (provider, charge_ref) DO NOTHING
)`
	transitionCr = `, cr AS (
	UPDATE client_requests SET answer = @answer::text, answered_at = @now
	WHERE id = @crid AND received_at >= @cr_since::timestamptz - interval '1 day' AND EXISTS (SELECT 1 FROM up)
)`
)

// transitionUpSent is transitionUpRow returning nothing the caller holds already. No result
// it writes: the caller sent it, and an embedding's vectors would cross the wire twice,
// encoded again by the server (a result the transition leaves as it was comes back). No
// request when the caller holds it (TransitionParams.Request): a request never changes once
// its operation exists, and an LLM call's prompt is often the largest thing on its row.
var transitionUpSent = strings.NewReplacer(
	"o.request,", "CASE WHEN NOT @have_request THEN o.request END,",
	"o.result,", "CASE WHEN @res_body::jsonb IS NULL THEN o.result END,").Replace(transitionUpRow)

// The parts a transition may leave out, one bit each: a statement names only the tables it
// writes. Every part it sends is set up by the server on each execution (its table and
// indexes opened, its expressions and constraints compiled) even when it writes nothing:
// setting up the executor is about a sixth of a backend's CPU in a lifecycle, more than
// writing the index entries.
const (
	withPr          = 1 << iota // a close to a final status: proposals
	withFin                     // an attempt's end
	withEv                      // evidence
	withOb                      // a status change: its outbox event, where a consumer is registered
	withCh                      // a success with the provider's record of an attempt: the charge
	withCr                      // a client request's answer
	withFinAudit                // an attempt's finish that is its own audit entry: no audit row
	transitionParts = 1 << iota
)

// transitionSQLs are Transition's statements by the parts they hold, each built once.
var transitionSQLs [transitionParts]string

func init() {
	for m := range transitionSQLs {
		var b strings.Builder
		b.WriteString(transitionUpSent)
		for _, p := range []struct {
			bit int
			sql string
		}{{withPr, transitionPr}, {withFin, transitionFin}, {withEv, transitionEv}} {
			switch {
			case m&p.bit == 0:
			case p.bit == withFin && m&withFinAudit != 0:
				b.WriteString(strings.Replace(p.sql, "\n\tWHERE", transitionFinAudit, 1))
			default:
				b.WriteString(p.sql)
			}
		}
		switch {
		case m&withFinAudit != 0 && m&withFin != 0:
		case m&withEv != 0:
			fmt.Fprintf(&b, transitionAud, "(SELECT id FROM ev)")
		default:
			fmt.Fprintf(&b, transitionAud, "NULL::bigint")
		}
		for _, p := range []struct {
			bit int
			sql string
		}{{withOb, transitionOb}, {withCh, transitionCh}, {withCr, transitionCr}} {
			if m&p.bit != 0 {
				b.WriteString(p.sql)
			}
		}
		b.WriteString("\nSELECT * FROM up")
		transitionSQLs[m] = b.String()
	}
}

// partsOf returns the parts of Transition that p writes.
func partsOf(p ops.TransitionParams) int {
	m := 0
	if p.To.Final() {
		m |= withPr
	}
	if p.Finish != nil {
		m |= withFin
	}
	if p.Evidence != nil && p.Evidence.Kind != "" {
		m |= withEv
	}
	if p.From != p.To {
		m |= withOb
	}
	if p.To == ops.StatusSucceeded && p.Result != nil && p.Result.ProviderRef != "" && p.Finish != nil && p.Finish.AttemptID > 0 {
		m |= withCh
	}
	if p.AnswerRequest != 0 && p.Answer != "" {
		m |= withCr
	}
	if finishAudited(p) {
		m |= withFinAudit
	}
	return m
}

// FinishAuditWindow bounds how long after its start an attempt's finish may be its own
// audit entry: the audit page reads those entries through the attempts' start-time index,
// newest first, and a finish within the window of its start is found in a window of starts.
// A finish later than that writes an audit row.
const FinishAuditWindow = time.Minute

// finishAudited says whether p is an attempt's finish that the attempt's row records as its
// audit entry (ops rule 6) instead of an audit row: everything the row would hold besides
// the operation's new status, version and phase, which fin keeps on the attempt, follows
// from the attempt. The before is the operation in progress at the version before; the
// action names the outcome; the reason is the outcome's when the operation left
// in_progress (NextStatus's final, unknown and expired), none otherwise; the time is the
// attempt's finish. A transition that says anything else keeps its audit row.
func finishAudited(p ops.TransitionParams) bool {
	f := p.Finish
	if f == nil || f.AttemptID == 0 || f.StartedAt.IsZero() || !f.FinishedAt.Equal(p.Now) ||
		f.FinishedAt.Sub(f.StartedAt) > FinishAuditWindow || f.FinishedAt.Before(f.StartedAt) {
		return false
	}
	reason := ""
	if p.To.Final() || p.To == ops.StatusUnknown || p.To == ops.StatusExpired {
		reason = "attempt " + string(f.Outcome)
	}
	return p.From == ops.StatusInProgress && p.Action == "attempt."+string(f.Outcome) && p.Reason == reason &&
		p.Approval == nil && (p.Evidence == nil || p.Evidence.Kind == "") && p.Actor != ""
}

// Transition implements ops.Store: the compare-and-set of ops rule 6 with its attempt, evidence,
// audit, outbox and client-request rows, in one statement and so one transaction.
func (db *DB) Transition(ctx context.Context, p ops.TransitionParams) (*ops.Operation, error) {
	args := pgx.NamedArgs{
		"id": p.ID, "version": p.Version, "from": string(p.From), "to": string(p.To), "phase": string(p.Phase),
		"now": p.Now, "actor": p.Actor, "action": p.Action, "reason": p.Reason, "owner": p.Owner,
		"lease": p.LeaseUntil, "require_expired": p.RequireLeaseExpired, "final": p.To.Final(),
		"event_id": uuid.Must(uuid.NewV7()).String(), "crid": p.AnswerRequest, "answer": nullStr(string(p.Answer)),
		"aid": int64(0), "astart": nil, "outcome": nil, "http_status": 0, "prid": "", "ecode": "", "fat": nil,
		"a_usage": nil, "a_cost": nil, "a_dup": false,
		"ev_kind": "", "ev_ref": "", "ev_summary": "", "ev_data": nil, "ev_by": "", "ev_at": nil,
		"res_ref": "", "res_prid": "", "res_body": nil, "res_usage": nil, "res_cost": int64(0), "res_events": nil,
		"pid": int64(0), "approved_by": "", "approval": "{}", "cr_since": nil, "have_request": p.Request != nil,
	}
	if p.AnswerRequest != 0 && p.Answer != "" {
		args["cr_since"] = p.AnswerSince
	}
	if a := p.Approval; a != nil {
		b, _ := json.Marshal(map[string]any{"proposal_id": a.ProposalID, "proposed_by": a.ProposedBy, "approved_by": a.ApprovedBy})
		args["pid"], args["approved_by"], args["approval"] = a.ProposalID, a.ApprovedBy, string(b)
	}
	if f := p.Finish; f != nil {
		args["aid"], args["outcome"], args["http_status"], args["prid"], args["ecode"], args["fat"] =
			f.AttemptID, string(f.Outcome), f.HTTPStatus, f.ProviderRequestID, f.ErrorCode, f.FinishedAt
		args["a_usage"], args["a_cost"], args["a_dup"] = jsonOrNil(f.Usage), f.CostMicros, f.PossibleDuplicate
		if !f.StartedAt.IsZero() {
			// A millisecond either way: the row holds the time cut to the microsecond. The
			// bounds stay a range even without a start, so that the attempts' monthly
			// partitions are pruned when the statement runs on its generic plan. The
			// range is narrow because a generic plan may read the attempts through their
			// start-time index instead of their key: a second either way read every
			// attempt of two seconds on each close.
			args["astart"] = f.StartedAt
		}
	}
	if e := p.Evidence; e != nil {
		args["ev_kind"], args["ev_ref"], args["ev_summary"], args["ev_data"], args["ev_by"], args["ev_at"] =
			string(e.Kind), storableText(e.ProviderRef), storableText(e.Summary), jsonOrNil(e.Data), e.RecordedBy, e.RecordedAt
	}
	if r := p.Result; r != nil {
		args["res_ref"], args["res_prid"], args["res_body"], args["res_usage"], args["res_cost"] =
			storableText(r.ProviderRef), r.ProviderRequestID, jsonOrNil(r.Body), jsonOrNil(r.Usage), r.CostMicros
		args["res_events"] = jsonOrNil(r.Events)
	}
	var o *ops.Operation
	err := db.group.queryRow(transitionSQLs[partsOf(p)], args, lockKey(false, p.ID), func(row pgx.Row) (err error) {
		o, err = scanOp(row)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, db.lostRace(ctx, p.ID, p.Action)
	}
	if err != nil {
		return nil, interpret(err, "change operation")
	}
	if args["res_body"] != nil && o.PurgedAt == nil {
		o.Result = p.Result.Body
	}
	if p.Request != nil && o.PurgedAt == nil {
		o.Request = p.Request
	}
	return o, nil
}
