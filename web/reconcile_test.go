package web_test

import (
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// newReconEnv serves the reconciliation pages on a fresh database.
func newReconEnv(t *testing.T) *env {
	t.Helper()
	s, tw := newServer(t)
	s.Recon, s.Exceptions, s.Operations = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB
	return start(t, tw, s.Handler())
}

func (e *env) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := e.db.Pool.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// seedRecon records one refund asked for three times (one duplicate answered from the stored
// result), sent twice (a timeout, then ok) and charged twice by Stripe, plus an orphan
// refund, an hour before t0.
func seedRecon(t *testing.T, e *env) (opID string, tenant int64) {
	t.Helper()
	ctx := context.Background()
	if err := e.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	return seedReconFor(t, e, tenant), tenant
}

// seedReconFor is seedRecon for a tenant that already exists.
func seedReconFor(t *testing.T, e *env, tenant int64) (opID string) {
	t.Helper()
	at := t0.Add(-time.Hour)
	opID = ops.NewOperationID()
	e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref, amount_cents,
	currency, status, provider_ref, created_at, updated_at, closed_at, closed_by)
VALUES ($1, $2, 'refund', 'stripe', '4417|3800|usd', 'settle_k', 'fp', '4417', 3800, 'usd', 'succeeded', 're_first', $3, $3, $3, 'w1')`,
		opID, tenant, at)
	for i, dup := range []bool{false, true, true} {
		answer := "new"
		if dup {
			answer = []string{"", "replayed", "in_progress"}[i]
		}
		e.exec(t, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'refund', $3, $4, nullif($5, ''), $6)`, tenant, opID, "toolu_0"+strconv.Itoa(i), dup, answer, at.Add(time.Duration(i)*time.Minute))
	}
	e.exec(t, `INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, outcome) VALUES ($1, 1, 'settle_k', 'w1', $2, 'timeout'),
	($1, 2, 'settle_k', 'w1', $3, 'ok')`, opID, at, at.Add(time.Second))
	e.exec(t, `INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, charged_at, seen_at)
VALUES ($1, 'stripe', 're_first', $2, 3800, 'usd', 'succeeded', $3, $3), ($1, 'stripe', 're_second', $2, 3800, 'usd', 'succeeded', $4, $4),
	(NULL, 'stripe', 're_orphan', NULL, 1200, 'usd', 'succeeded', $4, $4)`, tenant, opID, at.Add(time.Second), at.Add(time.Minute))
	rollUp(t, e)
	return opID
}

// rollUp runs the rollup job at t0, as 'settle serve' does in the background: the pages
// read its rollups.
func rollUp(t *testing.T, e *env) {
	t.Helper()
	if _, err := (&recon.Rollups{Store: rollupstore.New(e.db), Clock: ops.NewManualClock(t0)}).CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func signIn(t *testing.T, e *env, email string, role desk.Role) *http.Client {
	t.Helper()
	e.user(t, email, role)
	c := client(t)
	if resp := e.login(t, c, email, password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login %s = %d", email, resp.StatusCode)
	}
	return c
}

func TestReconcilePagesNeedTheirRoles(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	cases := []struct {
		role        desk.Role
		reconcile   int
		exceptions  int
		csvOrDrills int
	}{
		{desk.RoleSupport, http.StatusForbidden, http.StatusForbidden, http.StatusForbidden},
		{desk.RoleOncall, http.StatusForbidden, http.StatusOK, http.StatusForbidden},
		{desk.RoleManager, http.StatusOK, http.StatusOK, http.StatusOK},
		{desk.RoleAdmin, http.StatusOK, http.StatusOK, http.StatusOK},
	}
	for _, tc := range cases {
		c := signIn(t, e, string(tc.role)+"@example.com", tc.role)
		if r, body := e.get(t, c, "/reconcile"); r.StatusCode != tc.reconcile {
			t.Errorf("%s GET /reconcile = %d, want %d\n%s", tc.role, r.StatusCode, tc.reconcile, body)
		}
		if r, _ := e.get(t, c, "/reconcile/exceptions"); r.StatusCode != tc.exceptions {
			t.Errorf("%s GET /reconcile/exceptions = %d, want %d", tc.role, r.StatusCode, tc.exceptions)
		}
		if r, _ := e.get(t, c, "/reconcile.csv"); r.StatusCode != tc.csvOrDrills {
			t.Errorf("%s GET /reconcile.csv = %d, want %d", tc.role, r.StatusCode, tc.csvOrDrills)
		}
	}
	if r, _ := e.get(t, client(t), "/reconcile"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("signed out GET /reconcile = %d, want a redirect to the login", r.StatusCode)
	}
}

func TestReconcilePageShowsTheWindowAndDrillsDown(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	opID, _ := seedRecon(t, e)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	r, body := e.get(t, c, "/reconcile?range=24h&bucket=hour")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /reconcile = %d\n%s", r.StatusCode, body)
	}
	cell := func(id string) []string {
		re := regexp.MustCompile(`data-testid="` + id + `"[^>]*>\s*(?:<a[^>]*>)?\s*(?:<strong>)?([^<]+)`)
		var out []string
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			out = append(out, strings.TrimSpace(m[1]))
		}
		return out
	}
	// Two rows (the operation's and the orphan's) and the total.
	if got := cell("recon-client_requests"); len(got) != 3 || got[0] != "3" {
		t.Fatalf("client requests %v", got)
	}
	for id, want := range map[string]string{"recon-duplicates": "2", "recon-replays": "1", "recon-operations": "1",
		"recon-attempts": "2", "recon-timeouts": "1"} {
		if got := cell(id); got[len(got)-1] != want {
			t.Errorf("%s total %v, want %s", id, got, want)
		}
	}
	if got := cell("recon-difference"); len(got) != 3 || got[2] != "+2" {
		t.Errorf("differences %v, want a total of +2 (one double charge, one orphan)", got)
	}
	if got := cell("recon-lost"); got[len(got)-1] != "38.00 USD" {
		t.Errorf("lost %v, want 38.00 USD", got)
	}
	if got := cell("recon-saved"); got[len(got)-1] != "38.00 USD" {
		t.Errorf("saved %v, want 38.00 USD", got)
	}
	// The double-charge number links to the charge behind it.
	link := regexp.MustCompile(`href="(/reconcile/drill\?[^"]*measure=double_charges[^"]*)"`).FindStringSubmatch(body)
	if link == nil {
		t.Fatal("no drill-down link on the double charges")
	}
	r, drill := e.get(t, c, strings.ReplaceAll(link[1], "&amp;", "&"))
	if r.StatusCode != http.StatusOK || !strings.Contains(drill, "re_second") || strings.Contains(drill, "re_first") || !strings.Contains(drill, opID) {
		t.Fatalf("drill = %d\n%s", r.StatusCode, drill)
	}

	r, err := c.Get(e.url + "/reconcile.csv?range=24h&bucket=hour")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	recs, err := csv.NewReader(r.Body).ReadAll()
	if err != nil || r.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("csv: %v %s", err, r.Header.Get("Content-Type"))
	}
	diff := slices.Index(recs[0], "difference")
	if len(recs) != 3 || strings.Join(recs[0][:6], ",") != "window_start,tenant,kind,provider,api,client_requests" || diff < 0 {
		t.Fatalf("csv %v", recs)
	}
	for _, rec := range recs[1:] {
		// A refund calls no API of an LLM provider.
		if rec[1] == "shop" && (rec[4] != "" || rec[5] != "3" || rec[diff] != "1") {
			t.Fatalf("csv row %v, want no API, 3 client requests and a difference of 1", rec)
		}
	}
	for _, bad := range []string{"/reconcile?range=1y", "/reconcile?bucket=week", "/reconcile?range=30d&bucket=hour", "/reconcile?tenant=nope",
		"/reconcile/drill?at=x"} {
		if r, _ := e.get(t, c, bad); r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("GET %s = %d, want 422", bad, r.StatusCode)
		}
	}
}

// A week of hourly rows is shown a day per page, newest first: rendering 2,520 rows was
// most of that page's time. The total still covers the whole week and the export the whole
// range; the 24-hour table (25 windows) stays one page.
func TestReconcileHourlyWeekIsPaged(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	seedRecon(t, e)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	total := regexp.MustCompile(`data-testid="recon-total"[\s\S]*?data-testid="recon-client_requests"[^>]*>\s*([^<\s]+)`)
	r, body := e.get(t, c, "/reconcile?range=7d&bucket=hour")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET page 1 = %d\n%s", r.StatusCode, body)
	}
	if !strings.Contains(body, "Page 1 of 7: windows") || strings.Contains(body, `data-testid="recon-newer"`) ||
		!strings.Contains(body, `page=2`) || strings.Count(body, `data-testid="recon-row"`) != 2 {
		t.Fatalf("page 1: want the pager, a link to page 2 and the seeded hour's two rows\n%s", body)
	}
	if !strings.Contains(body, `href="/reconcile.csv?bucket=hour&amp;range=7d"`) {
		t.Errorf("the export link should hold the whole range\n%s", body)
	}
	r, body = e.get(t, c, "/reconcile?range=7d&bucket=hour&page=7")
	if r.StatusCode != http.StatusOK || !strings.Contains(body, "Page 7 of 7: windows") || strings.Contains(body, `data-testid="recon-older"`) ||
		!strings.Contains(body, `page=6`) || strings.Count(body, `data-testid="recon-row"`) != 0 {
		t.Fatalf("page 7 = %d: want the oldest day, empty, with a link to page 6\n%s", r.StatusCode, body)
	}
	if m := total.FindStringSubmatch(body); m == nil || m[1] != "3" {
		t.Fatalf("page 7: the total should still count the week's 3 client requests: %v\n%s", m, body)
	}
	if _, body = e.get(t, c, "/reconcile?range=24h&bucket=hour"); strings.Contains(body, `data-testid="recon-pager"`) {
		t.Errorf("the 24-hour table should be one page\n%s", body)
	}
	for _, bad := range []string{"/reconcile?range=7d&bucket=hour&page=8", "/reconcile?range=7d&bucket=hour&page=0",
		"/reconcile?range=7d&bucket=hour&page=x", "/reconcile?range=30d&bucket=day&page=2"} {
		if r, _ := e.get(t, c, bad); r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("GET %s = %d, want 422", bad, r.StatusCode)
		}
	}
}

func TestExceptionWorkflowOverHTTP(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	ctx := context.Background()
	opID, tenant := seedRecon(t, e)
	ex, _, err := reconstore.New(e.db).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "stripe", Ref: opID, TenantID: tenant,
		OperationID: opID, ChargeRefs: []string{"re_first", "re_second"}, AmountCents: 3800, Currency: "usd",
		Summary: "Operation charged twice.", Actor: "stripe reconciliation", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	c := signIn(t, e, "oncall@example.com", desk.RoleOncall)
	r, body := e.get(t, c, "/reconcile/exceptions")
	if r.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="exception-row"`) ||
		!strings.Contains(body, `data-testid="exception-count-open">1<`) {
		t.Fatalf("queue = %d\n%s", r.StatusCode, body)
	}
	page := "/reconcile/exceptions/" + strconv.FormatInt(ex.ID, 10)
	r, body = e.get(t, c, page)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("detail = %d\n%s", r.StatusCode, body)
	}
	// Ours beside theirs: two Stripe records where one is expected, the difference marked.
	for _, want := range []string{"stripe re_first", "stripe re_second", "2 charged of 2 records", `data-differs="true"`} {
		if !strings.Contains(body, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	post := func(v url.Values) (int, string) {
		t.Helper()
		resp, err := c.PostForm(e.url+page, v)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		_, _ = io.Copy(b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := post(url.Values{"version": {"1"}, "action": {"resolve"}, "note": {""}}); code != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "Resolving needs a note") {
		t.Fatalf("resolve without a note = %d\n%s", code, body)
	}
	if code, _ := post(url.Values{"version": {"1"}, "action": {"acknowledge"}}); code != http.StatusSeeOther {
		t.Fatalf("acknowledge = %d", code)
	}
	if code, body := post(url.Values{"version": {"1"}, "action": {"resolve"}, "note": {"late"}}); code != http.StatusConflict ||
		!strings.Contains(body, "changed since you looked") {
		t.Fatalf("a stale resolve = %d\n%s", code, body)
	}
	if code, _ := post(url.Values{"version": {"2"}, "action": {"resolve"}, "note": {"Customer keeps both; finance informed."}}); code != http.StatusSeeOther {
		t.Fatalf("resolve = %d", code)
	}
	_, body = e.get(t, c, page)
	if !strings.Contains(body, `data-testid="exception-status">resolved<`) || strings.Count(body, `data-testid="audit-row"`) != 3 ||
		!strings.Contains(body, "Customer keeps both; finance informed.") || !strings.Contains(body, "oncall@example.com") {
		t.Fatalf("after resolve:\n%s", body)
	}
	support := signIn(t, e, "support@example.com", desk.RoleSupport)
	resp, err := support.PostForm(e.url+page, url.Values{"version": {"3"}, "action": {"reopen"}, "note": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("support POST = %d, want 403", resp.StatusCode)
	}
}
