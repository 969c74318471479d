package web_test

import (
	"encoding/csv"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TestTheDuplicateRateCountsTheRequestsThatAskedForAPaidCall: ops rule 8 makes the
// duplicate rate a counted fact, and ops rule 12 lets it say no more than Settle knows. The
// rate answers "of the client requests that asked for a paid side effect, how many repeated
// one already asked for": a request refused at the door (bad input, a budget, a share) asked
// for nothing that could be repeated, and a cancel of a background response pays for no
// call, so neither is in its denominator. Of seven requests in the hour, two were refused, a
// cancel was answered and another refused: of the three admitted, two are duplicates, 66.67
// %, not 2 of 7. /insights, /reconcile and its export count the same three.
func TestTheDuplicateRateCountsTheRequestsThatAskedForAPaidCall(t *testing.T) {
	t.Parallel()
	e, c, body := insightsOfSevenRequests(t)
	dup := chartSection(t, body, "duplicate-rate")
	if want := "66.67 % over the range (2 of 3 admitted requests)."; !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(dup) {
		t.Errorf("the duplicate rate's headline is not %q\n%s", want, dup)
	}
	if m := regexp.MustCompile(`<p class="note">([^<]*)<`).FindStringSubmatch(dup); m == nil ||
		!regexp.MustCompile(`refused|cancel`).MatchString(html.UnescapeString(m[1])) {
		t.Errorf("the duplicate rate's note does not say what its denominator leaves out: %v", m)
	}
	_, page := e.get(t, c, "/reconcile?range=24h")
	total := regexp.MustCompile(`data-testid="recon-total"[\s\S]*?data-testid="recon-admitted_requests"[^>]*>\s*(?:<a[^>]*>)?([^<\s]+)`)
	if m := total.FindStringSubmatch(page); m == nil || m[1] != "3" {
		t.Errorf("/reconcile's total of admitted requests is %v, want 3", m)
	}
	// The number links to its rows: the three admitted requests, none refused, no cancel.
	link := regexp.MustCompile(`href="(/reconcile/drill\?[^"]*measure=admitted_requests[^"]*)"`).FindStringSubmatch(page)
	if link == nil {
		t.Fatalf("no drill-down link for the admitted requests\n%s", page)
	}
	if _, drill := e.get(t, c, html.UnescapeString(link[1])); strings.Count(drill, `data-testid="drill-row"`) != 3 ||
		regexp.MustCompile(`rejected|cancel`).MatchString(drill) {
		t.Errorf("the admitted requests' rows are not the three admitted ones\n%s", drill)
	}
	_, export := e.get(t, c, "/reconcile.csv?range=24h&bucket=hour")
	recs, err := csv.NewReader(strings.NewReader(export)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("the export does not read as CSV: %v\n%s", err, export)
	}
	i := slices.Index(recs[0], "admitted_requests")
	if i < 0 {
		t.Fatalf("the export has no admitted_requests column: %v", recs[0])
	}
	var sum int
	for _, rec := range recs[1:] {
		n, _ := strconv.Atoi(rec[i])
		sum += n
	}
	if sum != 3 {
		t.Errorf("the export counts %d admitted requests, want 3: %v", sum, recs)
	}
}

// seedSevenRequests records seven requests of an hour ago, on one LLM operation or none:
// a new one, a replay, a repeat in progress, two refused at the door, a cancel answered and
// one refused. Three are admitted, two of them duplicates, one of those a replay.
func seedSevenRequests(t *testing.T, e *env) {
	t.Helper()
	tenant := shopTenant(t, e)
	at := t0.Add(-time.Hour)
	op := ops.NewOperationID()
	e.exec(t, `INSERT INTO operations (id, tenant_id, kind, provider, api, intent_key, provider_key, fingerprint, amount_cents, currency,
	status, created_at, updated_at, closed_at, closed_by) VALUES ($1, $2, 'llm_call', 'openai', 'responses', 'i1', 'k1', 'fp', 0, '', 'succeeded', $3, $3, $3, 'w1')`, op, tenant, at)
	for i, r := range []struct {
		op        bool
		duplicate bool
		answer    string
	}{{true, false, "new"}, {true, true, "replayed"}, {true, true, "in_progress"}, {false, false, "rejected"}, {false, false, "rejected"},
		{true, false, "cancelled"}, {false, false, "cancel_refused"}} {
		var opID any
		if r.op {
			opID = op
		}
		e.exec(t, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, $2, 'llm_call', $3, $4, $5, $6)`, tenant, opID, "r"+strconv.Itoa(i), r.duplicate, r.answer, at.Add(time.Duration(i)*time.Second))
	}
}

// TestTheReplayRateCountsTheAdmittedRequests: ops rule 8 makes the replay rate a counted
// fact, and ops rule 12 lets it say no more than Settle knows. Its note reads "answered from
// a stored result instead of a new call": only a request Settle took on could have been
// either, and a replay is a duplicate answered so, so the rate shares the duplicate rate's
// denominator. A flood of refused requests (a tenant past its LLM budget retrying in a loop)
// must not make replays look rarer. Of the seven requests, one replay of three admitted is
// 33.33 %, not 1 of 7.
func TestTheReplayRateCountsTheAdmittedRequests(t *testing.T) {
	t.Parallel()
	_, _, body := insightsOfSevenRequests(t)
	replays := chartSection(t, body, "replay-rate")
	if want := "33.33 % over the range (1 of 3 admitted requests)."; !strings.Contains(replays, want) {
		t.Errorf("the replay rate's headline is not %q\n%s", want, replays)
	}
	if m := regexp.MustCompile(`<p class="note">([^<]*)<`).FindStringSubmatch(replays); m == nil ||
		!regexp.MustCompile(`refused|cancel`).MatchString(html.UnescapeString(m[1])) {
		t.Errorf("the replay rate's note does not say what its denominator leaves out: %v", m)
	}
}

// insightsOfSevenRequests is /insights over 24 h as a manager reads it, once the seven
// requests of seedSevenRequests are rolled up.
func insightsOfSevenRequests(t *testing.T) (*env, *http.Client, string) {
	t.Helper()
	e := newInsightsEnv(t)
	seedSevenRequests(t, e)
	rollUp(t, e)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	r, body := e.get(t, c, "/insights?range=24h")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /insights = %d\n%s", r.StatusCode, body)
	}
	return e, c, body
}
