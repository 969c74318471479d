package web_test

// One of each at the edge: one Idempotency-Key parser, one error → status table, one money
// formatter and one meaning of X-Request-Id, whatever the route.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/web"
)

// stubAccounts resolves every token to one tenant, or fails with err.
type stubAccounts struct {
	desk.Accounts
	err error
}

func (a stubAccounts) TenantByToken(context.Context, string) (*ops.Tenant, error) {
	if a.err != nil {
		return nil, a.err
	}
	return &ops.Tenant{ID: 7, Name: "shop", RequireIdempotencyKey: true}, nil
}

// stubGateway records the request it gets and answers with err, or with head and a body.
type stubGateway struct {
	err  error
	head llm.Head
	got  llm.Request
}

func (g *stubGateway) Complete(_ context.Context, req llm.Request, out llm.Sink) error {
	g.got = req
	if g.err != nil {
		return g.err
	}
	if err := out.Begin(g.head); err != nil {
		return err
	}
	return out.Write([]byte(`{"object":"chat.completion"}`))
}

// Refuse answers the refusal as is: the stub has no ledger to record it in.
func (g *stubGateway) Refuse(_ context.Context, _ int64, _ string, refusal error) error {
	return refusal
}

// stubJobs records the submission it gets and answers with err, or a new job.
type stubJobs struct {
	err error
	got jobs.Submission
}

func (j *stubJobs) Submit(_ context.Context, in jobs.Submission) (jobs.Submitted, error) {
	j.got = in
	if j.err != nil {
		return jobs.Submitted{}, j.err
	}
	return jobs.Submitted{Job: &jobs.Job{ID: "job-1", Status: "queued"}, Created: true}, nil
}

func (j *stubJobs) Get(context.Context, int64, string) (*jobs.Job, []jobs.Checkpoint, error) {
	return nil, nil, ops.Errorf(ops.ENOTFOUND, "no job")
}

// Refuse answers with the refusal: the stub records nothing.
func (j *stubJobs) Refuse(_ context.Context, _ int64, _ string, refusal error) error { return refusal }

type stubRefunds struct{ web.RefundTool }

type stubStatus struct{ mcptool.StatusStore }

// stubServer is the web server with every dependency a stub: no database.
func stubServer(t *testing.T, accounts desk.Accounts, gw *stubGateway, js *stubJobs) string {
	t.Helper()
	s := &web.Server{Accounts: accounts, Sessions: scs.New(), LLM: gw, Refunds: stubRefunds{}}
	s.RefundStatus = stubStatus{}
	s.JobsDeps = web.JobsDeps{Jobs: js}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

type edgeAnswer struct {
	status int
	header http.Header
	body   map[string]any
}

func edgePost(t *testing.T, url, body string, hdr ...string) edgeAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer stl_test")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return edgeAnswer{status: resp.StatusCode, header: resp.Header, body: out}
}

const edgeJob = `{"document":{"text":"A note."},"pipeline":"summarise","prompt_version":"v1","model_profile":"fast"}`

// Every route answers an error with the status of the one table: the LLM gateway, the
// jobs API, the JSON API and the MCP endpoint, for the same error.
func TestOneErrorStatusOnEveryRoute(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{"key in use", &ops.Error{Code: ops.ECONFLICT, Reason: llm.ReasonKeyInUse, Message: "in flight",
			Err: &llm.Problem{RetryAfter: 1500 * time.Millisecond}}, http.StatusConflict, llm.ReasonKeyInUse, "2"},
		{"key reused", &ops.Error{Code: ops.EINVALID, Reason: jobs.ReasonKeyReused, Message: "other body"}, http.StatusUnprocessableEntity, jobs.ReasonKeyReused, ""},
		{"invalid key", &ops.Error{Code: ops.EINVALID, Reason: jobs.ReasonInvalidKey, Message: "bad key"}, http.StatusBadRequest, llm.ReasonInvalidKey, ""},
		{"provider timeout", &ops.Error{Code: ops.EUNAVAILABLE, Reason: llm.ReasonTimeout, Message: "slow"}, http.StatusGatewayTimeout, llm.ReasonTimeout, ""},
		{"rate limited", &ops.Error{Code: ops.EUNAVAILABLE, Reason: llm.ReasonRateLimited, Message: "slow down",
			Err: &llm.Problem{RetryAfter: 3 * time.Second}}, http.StatusTooManyRequests, llm.ReasonRateLimited, "3"},
		{"unavailable", ops.Errorf(ops.EUNAVAILABLE, "The database does not answer."), http.StatusServiceUnavailable, ops.EUNAVAILABLE, "5"},
		{"not found", ops.Errorf(ops.ENOTFOUND, "gone"), http.StatusNotFound, ops.ENOTFOUND, ""},
		{"internal", errors.New("disk on fire"), http.StatusInternalServerError, ops.EINTERNAL, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(route string, a edgeAnswer) {
				t.Helper()
				if a.status != c.status || a.body["code"] != c.code || a.header.Get("Retry-After") != c.retryAfter ||
					a.header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s: %d %v Retry-After %q %s; want %d %s Retry-After %q problem+json", route, a.status, a.body["code"],
						a.header.Get("Retry-After"), a.header.Get("Content-Type"), c.status, c.code, c.retryAfter)
				}
				if strings.Contains(toString(a.body["detail"]), "fire") {
					t.Errorf("%s: an internal error's text left the server", route)
				}
			}
			// The error comes from the service behind each route.
			url := stubServer(t, stubAccounts{}, &stubGateway{err: c.err}, &stubJobs{err: c.err})
			check("POST /v1/chat/completions", edgePost(t, url+"/v1/chat/completions", `{}`, "Idempotency-Key", "k1"))
			check("POST /api/v1/jobs", edgePost(t, url+"/api/v1/jobs", edgeJob, "Idempotency-Key", "k1"))
			// The error comes from resolving the token, on every route behind one.
			url = stubServer(t, stubAccounts{err: c.err}, &stubGateway{}, &stubJobs{})
			check("token for POST /v1/chat/completions", edgePost(t, url+"/v1/chat/completions", `{}`))
			check("token for POST /api/v1/jobs", edgePost(t, url+"/api/v1/jobs", edgeJob))
			check("token for POST /api/v1/refunds", edgePost(t, url+"/api/v1/refunds", `{}`))
			check("token for POST /mcp", edgePost(t, url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		})
	}
}

func toString(v any) string { s, _ := v.(string); return s }

// X-Request-Id means one thing: Settle's own id of the request, on every answer. The
// provider's id travels in Settle-Provider-Request-Id and the client's own id is its
// request ref (X-Request-Ref, or request_ref in a body).
func TestXRequestIDIsSettlesOwn(t *testing.T) {
	t.Parallel()
	gw := &stubGateway{head: llm.Head{OperationID: "op-1", ProviderRequestID: "req_provider_1", Length: 28}}
	js := &stubJobs{}
	url := stubServer(t, stubAccounts{}, gw, js)
	own := regexp.MustCompile(`^[0-9a-f]{16}$`)

	a := edgePost(t, url+"/v1/chat/completions", `{}`, "Idempotency-Key", "k1", "X-Request-Id", "client-id", "X-Request-Ref", "ref-1")
	if a.status != http.StatusOK || !own.MatchString(a.header.Get("X-Request-Id")) {
		t.Errorf("chat completion: %d, X-Request-Id %q; want Settle's own id", a.status, a.header.Get("X-Request-Id"))
	}
	if got := a.header.Get("Settle-Provider-Request-Id"); got != "req_provider_1" {
		t.Errorf("Settle-Provider-Request-Id = %q, want the provider's id", got)
	}
	if gw.got.RequestRef != "ref-1" {
		t.Errorf("chat completion recorded request ref %q, want X-Request-Ref", gw.got.RequestRef)
	}
	edgePost(t, url+"/v1/chat/completions", `{}`, "Idempotency-Key", "k1", "X-Client-Request-Id", "oai-1")
	if gw.got.RequestRef != "oai-1" {
		t.Errorf("chat completion recorded request ref %q, want X-Client-Request-Id (kept for OpenAI clients)", gw.got.RequestRef)
	}
	edgePost(t, url+"/v1/chat/completions", `{}`, "Idempotency-Key", "k1", "X-Request-Id", "client-id")
	if gw.got.RequestRef != "" {
		t.Errorf("chat completion took X-Request-Id %q as the client's ref", gw.got.RequestRef)
	}

	a = edgePost(t, url+"/api/v1/jobs", edgeJob, "Idempotency-Key", "k1", "X-Request-Id", "client-id")
	if a.status != http.StatusAccepted || !own.MatchString(a.header.Get("X-Request-Id")) || js.got.RequestRef != "" {
		t.Errorf("job: %d, X-Request-Id %q, request ref %q; want Settle's own id and no ref", a.status, a.header.Get("X-Request-Id"), js.got.RequestRef)
	}
	edgePost(t, url+"/api/v1/jobs", edgeJob, "Idempotency-Key", "k1", "X-Request-Ref", "ref-2")
	if js.got.RequestRef != "ref-2" {
		t.Errorf("job request ref %q, want X-Request-Ref", js.got.RequestRef)
	}
	edgePost(t, url+"/api/v1/jobs", strings.Replace(edgeJob, `"fast"`, `"fast","request_ref":"ref-3"`, 1), "Idempotency-Key", "k1", "X-Request-Ref", "ref-2")
	if js.got.RequestRef != "ref-3" {
		t.Errorf("job request ref %q, want the body's request_ref", js.got.RequestRef)
	}
}

// The jobs route hands the service the key as the one parser reads it.
func TestJobsRouteParsesTheKeyLikeTheGateway(t *testing.T) {
	t.Parallel()
	js := &stubJobs{}
	url := stubServer(t, stubAccounts{}, &stubGateway{}, js)
	for raw, want := range map[string]string{`"abc"`: "abc", ` abc `: "abc", `"a\"b"`: `a"b`, "a b": "a b"} {
		if a := edgePost(t, url+"/api/v1/jobs", edgeJob, "Idempotency-Key", raw); a.status != http.StatusAccepted || js.got.IdempotencyKey != want {
			t.Errorf("%q: %d, key %q; want %q", raw, a.status, js.got.IdempotencyKey, want)
		}
	}
}

// The same Idempotency-Key values mean the same on the LLM gateway and the jobs API: a
// quoted sf-string and a bare token name one key, spaces around are trimmed, and what one
// route refuses the other refuses with the same 400.
func TestIdempotencyKeyOneGrammarOnEveryRoute(t *testing.T) {
	t.Parallel()
	lw := newLLMWorld(t, llmSetup{})
	je := newJobsEnv(t)
	body := chatBody("one grammar", 0.2, false)
	// llmKey sends raw on the gateway and returns the key its operation got, or the code.
	llmKey := func(raw string) (string, string) {
		resp := lw.post(t, "shop", raw, body)
		if resp.StatusCode != http.StatusOK {
			var p problemBody
			_ = json.NewDecoder(resp.Body).Decode(&p)
			return "", strconv.Itoa(resp.StatusCode) + " " + p.Code
		}
		op, err := lw.db.Get(context.Background(), resp.Header.Get("Settle-Operation-Id"))
		if err != nil {
			t.Fatal(err)
		}
		return op.IntentKey, ""
	}
	jobKey := func(raw string) (string, string) {
		code, out, _ := je.do(t, http.MethodPost, "/api/v1/jobs", je.token, raw, jobJSON)
		if code != http.StatusAccepted && code != http.StatusOK {
			return "", strconv.Itoa(code) + " " + toString(out["code"])
		}
		_, job, _ := je.do(t, http.MethodGet, "/api/v1/jobs/"+toString(out["job_id"]), je.token, "", "")
		return toString(job["idempotency_key"]), ""
	}
	invalid := "400 " + llm.ReasonInvalidKey
	for _, c := range []struct{ raw, key, refusal string }{
		{`"abc"`, "abc", ""},
		{`abc`, "abc", ""},
		{`  abc  `, "abc", ""},
		{`"a b"`, "a b", ""},
		{`a b`, "a b", ""},
		{`"a\"b"`, `a"b`, ""},
		{`""`, "", invalid},
		{`"abc`, "", invalid},
		{`"abc";v=1`, "", invalid},
		{strings.Repeat("k", 256), "", invalid},
		{"ключ", "", invalid},
	} {
		lk, lr := llmKey(c.raw)
		jk, jr := jobKey(c.raw)
		if lk != c.key || lr != c.refusal || jk != c.key || jr != c.refusal {
			t.Errorf("Idempotency-Key %s: gateway %q %q, jobs %q %q; want %q %q on both", c.raw, lk, lr, jk, jr, c.key, c.refusal)
		}
	}
}
