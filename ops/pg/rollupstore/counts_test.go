package rollupstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// seeded is a mixed workload as the ledger would have recorded it, kept in memory so the
// expected numbers can be computed without SQL.
type seeded struct {
	ops      []seedOp
	requests []seedRequest
	attempts []seedAttempt
	charges  []seedCharge
}

type seedOp struct {
	id, kind, provider, status, currency string
	tenant, cents, costMicros            int64
	created                              time.Time
}

type seedRequest struct {
	tenant    int64
	kind      string
	op        int // index into ops, -1 for a rejected request
	duplicate bool
	answer    string
	at        time.Time
}

type seedAttempt struct {
	op      int
	outcome string
	at      time.Time
}

type seedCharge struct {
	id       int64
	op       int // -1 for an orphan
	ref      string
	provider string
	status   string
	cents    int64
	currency string
	at       time.Time
}

// seed writes a random workload over the three days before end.
func seed(t *testing.T, db *pg.DB, rnd *rand.Rand, end time.Time) *seeded {
	t.Helper()
	ctx := context.Background()
	var tenants []int64
	for _, name := range []string{"acme", "globex"} {
		var id int64
		if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ($1) RETURNING id`, name).Scan(&id); err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, id)
	}
	span := int64(72 * time.Hour / time.Second)
	at := func() time.Time { return end.Add(-time.Duration(rnd.Int64N(span)) * time.Second) }
	pick := func(xs ...string) string { return xs[rnd.IntN(len(xs))] }
	s := &seeded{}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := range 80 {
		o := seedOp{id: uuid.Must(uuid.NewV7()).String(), tenant: tenants[rnd.IntN(2)], created: at(),
			status: pick("succeeded", "succeeded", "succeeded", "failed", "unknown", "expired", "in_progress")}
		if rnd.IntN(3) == 0 {
			o.kind, o.provider, o.costMicros = "llm_call", "fakellm", rnd.Int64N(50_000)
		} else {
			o.kind, o.provider, o.cents, o.currency = "refund", "stripe", 100+rnd.Int64N(10_000), pick("usd", "eur")
		}
		var closed any
		if o.status == "succeeded" || o.status == "failed" {
			closed = o.created.Add(time.Minute)
		}
		exec(`INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, amount_cents, currency,
	cost_micros, status, created_at, updated_at, closed_at)
VALUES ($1, $2, $3, $4, $5, $6, 'fp', $7, $8, $9, $10, $11, $11, $12)`, o.id, o.tenant, o.kind, o.provider, fmt.Sprint("intent-", i),
			fmt.Sprint("key-", i), o.cents, o.currency, o.costMicros, o.status, o.created, closed)
		s.ops = append(s.ops, o)
		for n := range rnd.IntN(4) {
			r := seedRequest{tenant: o.tenant, kind: o.kind, op: i, duplicate: n > 0, at: o.created.Add(time.Duration(n*rnd.IntN(7200)) * time.Second)}
			r.answer = "new"
			if r.duplicate {
				r.answer = pick("replayed", "replayed", "in_progress", "checking", "conflict", "retried", "")
			}
			s.requests = append(s.requests, r)
		}
		for n := range rnd.IntN(4) {
			a := seedAttempt{op: i, at: o.created.Add(time.Duration(n*rnd.IntN(3000)) * time.Second),
				outcome: pick("ok", "timeout", "timeout", "rate_limited", "server_error", "not_sent", "")}
			exec(`INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, outcome) VALUES ($1, $2, 'k', 'w', $3, nullif($4, ''))`,
				o.id, n+1, a.at, a.outcome)
			s.attempts = append(s.attempts, a)
		}
		for range rnd.IntN(3) {
			s.charges = append(s.charges, seedCharge{op: i, provider: o.provider, cents: 100 + rnd.Int64N(5000), currency: pick("usd", "eur"),
				status: pick("succeeded", "succeeded", "pending", "failed"), at: o.created.Add(time.Duration(rnd.IntN(90000)) * time.Second)})
		}
	}
	for range 15 {
		s.requests = append(s.requests, seedRequest{tenant: tenants[rnd.IntN(2)], kind: pick("refund", "llm_call"), op: -1, answer: "rejected", at: at()})
		s.charges = append(s.charges, seedCharge{op: -1, provider: pick("stripe", "fakellm"), cents: 100 + rnd.Int64N(900),
			currency: "usd", status: pick("succeeded", "canceled"), at: at()})
	}
	for _, r := range s.requests {
		var op any
		if r.op >= 0 {
			op = s.ops[r.op].id
		}
		exec(`INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, $3, 'r', $4, nullif($5, ''), $6)`, r.tenant, op, r.kind, r.duplicate, r.answer, r.at)
	}
	for i := range s.charges {
		c := &s.charges[i]
		c.ref = fmt.Sprintf("re_%d", i)
		var op, tenant any
		if c.op >= 0 {
			op, tenant = s.ops[c.op].id, s.ops[c.op].tenant
		}
		if err := db.Pool.QueryRow(ctx, `INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency,
	status, charged_at, seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING id`,
			tenant, c.provider, c.ref, op, c.cents, c.currency, c.status, c.at).Scan(&c.id); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// expected computes the table from the seeded rows, following the definitions on
// recon.MetricsRow.
func (s *seeded) expected(f recon.MetricsFilter) []recon.MetricsRow {
	rows := map[recon.MetricsKey]*recon.MetricsRow{}
	in := func(t time.Time) bool { return !t.Before(f.From) && t.Before(f.To) }
	keep := func(tenant int64, kind, provider string) bool {
		return (f.TenantID == 0 || tenant == f.TenantID) && (f.Kind == "" || kind == string(f.Kind)) && (f.Provider == "" || provider == f.Provider)
	}
	row := func(t time.Time, tenant int64, kind, provider string) *recon.MetricsRow {
		k := recon.MetricsKey{Bucket: t.Truncate(f.Bucket).UTC(), TenantID: tenant, Kind: ops.Kind(kind), Provider: provider}
		if rows[k] == nil {
			rows[k] = &recon.MetricsRow{MetricsKey: k, Saved: recon.Money{}, Lost: recon.Money{}}
		}
		return rows[k]
	}
	money := func(o seedOp) (string, int64) {
		if o.kind == "refund" {
			return o.currency, o.cents * 10000
		}
		return "usd", o.costMicros
	}
	for _, r := range s.requests {
		provider := ""
		if r.op >= 0 {
			provider = s.ops[r.op].provider
		}
		if !in(r.at) || !keep(r.tenant, r.kind, provider) {
			continue
		}
		m := row(r.at, r.tenant, r.kind, provider)
		m.ClientRequests++
		if r.duplicate {
			m.Duplicates++
		}
		switch r.answer {
		case "in_progress":
			m.InProgress++
		case "conflict":
			m.Conflicts++
		case "checking":
			m.Checking++
		case "rejected":
			m.Rejected++
		}
		if r.answer == "replayed" {
			m.Replays++
			m.Saved.Add(money(s.ops[r.op]))
		}
	}
	for _, o := range s.ops {
		if !in(o.created) || !keep(o.tenant, o.kind, o.provider) {
			continue
		}
		m := row(o.created, o.tenant, o.kind, o.provider)
		m.Operations++
		switch o.status {
		case "succeeded":
			m.Succeeded++
		case "failed":
			m.Failed++
		case "unknown":
			m.Unknown++
		case "expired":
			m.Expired++
		}
	}
	for _, a := range s.attempts {
		o := s.ops[a.op]
		if !in(a.at) || !keep(o.tenant, o.kind, o.provider) {
			continue
		}
		m := row(a.at, o.tenant, o.kind, o.provider)
		m.Attempts++
		if a.outcome != "not_sent" {
			m.AttemptsSent++
		}
		if a.outcome == "timeout" {
			m.Timeouts++
		}
	}
	charged := func(c seedCharge) bool { return c.status == "succeeded" || c.status == "pending" }
	byOp := map[int][]seedCharge{}
	for _, c := range s.charges {
		if !charged(c) {
			continue
		}
		if c.op < 0 {
			if in(c.at) && keep(0, "", c.provider) && f.TenantID == 0 {
				m := row(c.at, 0, "", c.provider)
				m.Charges++
				m.Orphans++
			}
			continue
		}
		byOp[c.op] = append(byOp[c.op], c)
	}
	for i, cs := range byOp {
		o := s.ops[i]
		if !in(o.created) || !keep(o.tenant, o.kind, o.provider) {
			continue
		}
		sort.Slice(cs, func(a, b int) bool {
			return cs[a].at.Before(cs[b].at) || cs[a].at.Equal(cs[b].at) && cs[a].id < cs[b].id
		})
		m := row(o.created, o.tenant, o.kind, o.provider)
		for n, c := range cs {
			m.Charges++
			if n > 0 {
				m.DoubleCharges++
				m.Lost.Add(c.currency, c.cents*10000)
			}
		}
	}
	out := make([]recon.MetricsRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case !a.Bucket.Equal(b.Bucket):
			return a.Bucket.Before(b.Bucket)
		case a.TenantID != b.TenantID:
			return a.TenantID < b.TenantID
		case a.Kind != b.Kind:
			return a.Kind < b.Kind
		default:
			return a.Provider < b.Provider
		}
	})
	return out
}

// The per-window numbers equal counts computed directly from the recorded rows, for random
// mixed workloads, per hour and per day, with and without filters: both the raw counts
// (ReconMetrics) and the rollups the pages read (RollupMetrics), after the rollup job ran.
// Then rows arrive late and old operations change (closed, charged again); one more run of
// the job brings the rollups level with the raw rows again, and a repeated run changes
// nothing.
func TestReconMetricsEqualCountsOfTheRawRows(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for seedN := range uint64(5) {
		t.Run(fmt.Sprint("seed", seedN), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := pgtest.New(t)
			rnd := rand.New(rand.NewPCG(seedN, 42))
			s := seed(t, db, rnd, end)
			var tenant int64
			_ = db.Pool.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'globex'`).Scan(&tenant)
			filters := []recon.MetricsFilter{
				{Window: recon.Window{From: end.Add(-72 * time.Hour), To: end}, Bucket: time.Hour},
				{Window: recon.Window{From: end.Add(-96 * time.Hour), To: end.Add(24 * time.Hour)}, Bucket: 24 * time.Hour},
				{Window: recon.Window{From: end.Add(-30 * time.Hour), To: end.Add(-5 * time.Hour)}, Bucket: time.Hour, TenantID: tenant},
				{Window: recon.Window{From: end.Add(-48 * time.Hour), To: end}, Bucket: 24 * time.Hour, Kind: ops.KindRefund, Provider: "stripe"},
			}
			// Rollup-only shapes: quarter hours, and hourly rows over a window that starts
			// and ends inside hours (minute rows fill the edges).
			rollupOnly := []recon.MetricsFilter{
				{Window: recon.Window{From: end.Add(-24 * time.Hour), To: end}, Bucket: 15 * time.Minute},
				{Window: recon.Window{From: end.Add(-50*time.Hour - 17*time.Minute), To: end.Add(-3*time.Hour - 41*time.Minute)}, Bucket: time.Hour},
				{Window: recon.Window{From: end, To: end.Add(8 * time.Hour)}, Bucket: 15 * time.Minute},
			}
			// Requests and attempts of the last operations come up to 6 hours after them.
			clock := ops.NewManualClock(end.Add(7 * time.Hour))
			// A small span makes the first run over three days take several passes.
			roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock, MaxSpan: 7 * time.Hour}
			rep, err := roll.CatchUp(ctx)
			if err != nil || !rep.CaughtUp {
				t.Fatalf("catch up: %+v %v", rep, err)
			}
			checkMetrics(t, db, s, filters, rollupOnly, true)

			// Later: rows committed late, operations closed, charges found by reconciliation.
			lastRun := clock.Now()
			clock.Advance(10 * time.Minute)
			mutate(t, db, rnd, s, end, lastRun, clock.Now())
			if _, err := roll.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			checkMetrics(t, db, s, filters, rollupOnly, false)

			// Running again, now or a minute later, replaces rows with the same rows.
			before := dumpRollups(t, db)
			for range 2 {
				if _, err := roll.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
				if after := dumpRollups(t, db); !reflect.DeepEqual(before, after) {
					t.Fatalf("a repeated run changed the rollups:\n%v\n%v", before, after)
				}
				clock.Advance(time.Minute)
			}
		})
	}
}

// checkMetrics compares both readings with the expected table; drills checks the drill-down
// too (it reads raw rows, so once is enough).
func checkMetrics(t *testing.T, db *pg.DB, s *seeded, filters, rollupOnly []recon.MetricsFilter, drills bool) {
	t.Helper()
	ctx := context.Background()
	for i, f := range append(append([]recon.MetricsFilter{}, filters...), rollupOnly...) {
		want := s.expected(f)
		if i == 0 {
			var tot recon.MetricsRow
			for _, r := range want {
				tot.Replays, tot.Timeouts, tot.DoubleCharges, tot.Orphans = tot.Replays+r.Replays, tot.Timeouts+r.Timeouts,
					tot.DoubleCharges+r.DoubleCharges, tot.Orphans+r.Orphans
			}
			if tot.Replays == 0 || tot.Timeouts == 0 || tot.DoubleCharges == 0 || tot.Orphans == 0 {
				t.Fatalf("the workload lacks a case: %+v", tot)
			}
		}
		rolled, err := rollupstore.New(db).RollupMetrics(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normal(rolled), normal(want)) {
			t.Fatalf("rollups, filter %d: got %d rows, want %d\n got %+v\nwant %+v", i, len(rolled), len(want), rolled, want)
		}
		if i >= len(filters) {
			continue
		}
		got, err := rollupstore.New(db).ReconMetrics(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normal(got), normal(want)) {
			t.Fatalf("raw, filter %d: got %d rows, want %d\n got %+v\nwant %+v", i, len(got), len(want), got, want)
		}
		if !drills || f.TenantID != 0 || f.Kind != "" {
			continue // the drill cell is exact; filters only narrow the table
		}
		// The drill-down lists the rows behind a number: as many as the number says.
		for _, r := range rolled {
			for m, n := range map[recon.Measure]int64{recon.MeasureClientRequests: r.ClientRequests, recon.MeasureReplays: r.Replays,
				recon.MeasureSucceeded: r.Succeeded, recon.MeasureTimeouts: r.Timeouts, recon.MeasureCharges: r.Charges,
				recon.MeasureDoubleCharges: r.DoubleCharges, recon.MeasureOrphans: r.Orphans} {
				d, err := rollupstore.New(db).ReconDrill(ctx, recon.DrillFilter{MetricsKey: r.MetricsKey, Width: f.Bucket, Measure: m})
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(d)) != n {
					t.Fatalf("drill %s of %+v: %d rows, the table says %d", m, r.MetricsKey, len(d), n)
				}
			}
		}
	}
}

// mutate changes the seeded workload the way the ledger and the reconciler would after the
// rollup job ran: open operations closed (each status change audited: an audit row, or for
// one in progress the finish of the attempt that closed it), charges
// recorded for old operations (a second one makes a double charge), orphans found, and
// client requests and attempts stamped a few minutes ago but committed only now.
func mutate(t *testing.T, db *pg.DB, rnd *rand.Rand, s *seeded, end, lastRun, now time.Time) {
	t.Helper()
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	closed := 0
	for i := range s.ops {
		o := &s.ops[i]
		if o.status != "unknown" && o.status != "expired" && o.status != "in_progress" || rnd.IntN(2) == 0 {
			continue
		}
		to := []string{"succeeded", "failed"}[rnd.IntN(2)]
		exec(`UPDATE operations SET status = $2, closed_at = $3, updated_at = $3 WHERE id = $1`, o.id, to, now)
		if o.status == "in_progress" {
			// Closed by its attempt's finish, which the attempt records as its audit entry.
			exec(`INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome, audit_id, op_status, op_version, op_phase)
VALUES ($1, 98, 'k', 'w', $2, $3, 'ok', nextval('audit_log_id_seq'), $4, 2, '')`, o.id, now.Add(-2*time.Second), now, to)
			s.attempts = append(s.attempts, seedAttempt{op: i, outcome: "ok", at: now.Add(-2 * time.Second)})
		} else {
			exec(`INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES ($1, 'test', 'close', 'operation', $2)`, now, o.id)
		}
		o.status = to
		closed++
	}
	if closed == 0 {
		t.Fatal("nothing to close")
	}
	addCharge := func(c seedCharge) {
		c.ref = fmt.Sprintf("re_late_%d", len(s.charges))
		var op, tenant any
		if c.op >= 0 {
			op, tenant = s.ops[c.op].id, s.ops[c.op].tenant
		}
		if err := db.Pool.QueryRow(ctx, `INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency,
	status, charged_at, seen_at) VALUES ($1, $2, $3, $4, $5, 'usd', 'succeeded', $6, $7) RETURNING id`,
			tenant, c.provider, c.ref, op, c.cents, c.at, now).Scan(&c.id); err != nil {
			t.Fatal(err)
		}
		s.charges = append(s.charges, c)
	}
	for range 6 {
		i := rnd.IntN(len(s.ops))
		addCharge(seedCharge{op: i, provider: s.ops[i].provider, cents: 100 + rnd.Int64N(900), currency: "usd", status: "succeeded",
			at: s.ops[i].created.Add(time.Hour)})
	}
	addCharge(seedCharge{op: -1, provider: "stripe", cents: 500, currency: "usd", status: "succeeded", at: end.Add(-40 * time.Hour)})
	// Stamped before the last run ended, within its overlap, and committed after it.
	late := lastRun.Add(-recon.DefaultRollupOverlap / 2)
	i := rnd.IntN(len(s.ops))
	o := s.ops[i]
	exec(`INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, $3, 'late', true, 'replayed', $4)`, o.tenant, o.id, o.kind, late)
	s.requests = append(s.requests, seedRequest{tenant: o.tenant, kind: o.kind, op: i, duplicate: true, answer: "replayed", at: late})
	exec(`INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, outcome) VALUES ($1, 99, 'k', 'w', $2, 'timeout')`, o.id, late)
	s.attempts = append(s.attempts, seedAttempt{op: i, outcome: "timeout", at: late})
}

// dumpRollups returns every rollup and money row, without when it was computed.
func dumpRollups(t *testing.T, db *pg.DB) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
SELECT (r.*)::text FROM (SELECT width_seconds, start, tenant_id, kind, provider, client_requests, duplicates, replays,
	answered_in_progress, answered_conflict, answered_checking, answered_rejected, operations, succeeded, failed, unknown, expired,
	attempts, attempts_sent, timeouts, charges, orphans, double_charges FROM rollups) r
UNION ALL SELECT (m.*)::text FROM rollup_money m ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// normal makes rows comparable: empty money maps and nil ones are the same.
func normal(rows []recon.MetricsRow) []recon.MetricsRow {
	out := make([]recon.MetricsRow, len(rows))
	for i, r := range rows {
		if len(r.Saved) == 0 {
			r.Saved = nil
		}
		if len(r.Lost) == 0 {
			r.Lost = nil
		}
		out[i] = r
	}
	return out
}

func TestReconMetricsRefusesBadWindows(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, f := range []recon.MetricsFilter{
		{Window: recon.Window{From: end, To: end.Add(-time.Hour)}, Bucket: time.Hour},
		{Window: recon.Window{From: end.Add(-time.Hour), To: end}, Bucket: time.Minute},
		{Window: recon.Window{From: end.Add(-400 * 24 * time.Hour), To: end}, Bucket: time.Hour},
	} {
		if _, err := rollupstore.New(db).ReconMetrics(context.Background(), f); ops.ErrorCode(err) != ops.EINVALID {
			t.Errorf("%+v: %v, want invalid", f, err)
		}
	}
}
