package anthropic_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

const apiKey = "sk-ant-api03-settle-test"

func start(t *testing.T) (*fake.Anthropic, *anthropic.Client) { return startWith(t, apiKey) }

func startWith(t *testing.T, key string) (*fake.Anthropic, *anthropic.Client) {
	t.Helper()
	f := fake.NewAnthropic(fake.AnthropicOptions{Words: 6})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	c, err := anthropic.New(anthropic.Config{BaseURL: base + "/", APIKey: key, AttemptTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

const body = `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"where is order 4417?"}]}`

// stream is a call's Event and Whole as the gateway's assembler answers them: an error event
// is the provider's word that the generation failed, message_stop makes the message whole.
func stream(c *llm.Call) (types *[]string) {
	var seen []string
	stopped := false
	c.Stream = true
	c.Event = func(d []byte, _ bool) error {
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(d, &ev)
		seen = append(seen, ev.Type)
		switch ev.Type {
		case "error":
			return llm.ErrStreamFailed
		case "message_stop":
			stopped = true
		}
		return nil
	}
	c.Whole = func() bool { return stopped }
	return &seen
}

// TestSendPostsMessagesWithTheClientsHeaders: the message goes to {base}/v1/messages with the
// key as x-api-key and the client's anthropic-version and anthropic-beta, or the default
// version when the client sent none; the answer is the provider's, named by its request id.
func TestSendPostsMessagesWithTheClientsHeaders(t *testing.T) {
	t.Parallel()
	f, c := start(t)
	ctx := context.Background()
	r := c.Send(ctx, llm.Call{Path: "/v1/messages", Body: []byte(body),
		Header: map[string]string{"anthropic-version": "2023-06-01", "anthropic-beta": "extended-cache-ttl-2025-04-11"}})
	if r.Outcome != ops.OutcomeOK || r.RequestID == "" || len(r.Body) == 0 {
		t.Fatalf("reply %+v", r)
	}
	r2 := c.Send(ctx, llm.Call{Body: []byte(body)})
	if r2.Outcome != ops.OutcomeOK {
		t.Fatalf("reply without headers %+v", r2)
	}
	gens, reqs := f.Generations(), f.Requests()
	if len(gens) != 2 || gens[0].APIKeyID != fake.AnthropicKeyID(apiKey) || gens[0].AnthropicBeta != "extended-cache-ttl-2025-04-11" ||
		gens[0].AnthropicVersion != "2023-06-01" || gens[1].AnthropicVersion != llm.DefaultAnthropicVersion || gens[1].AnthropicBeta != "" {
		t.Fatalf("generations %+v", gens)
	}
	if reqs[0].Path != "/v1/messages" || reqs[0].Header.Get("Idempotency-Key") != "" {
		t.Fatalf("request %+v", reqs[0])
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &m); err != nil || m.ID != gens[0].ID || r.RequestID != gens[0].RequestID {
		t.Fatalf("answer %s, request id %s; generation %+v", r.Body, r.RequestID, gens[0])
	}
}

// TestSendClassifiesAnswers: each way the provider answers is the outcome the ledger needs
// (ops rule 5): refusals at the door (429, 529) may be retried and billed nothing, a 500
// or a timeout may have been billed, a bad request or a bad key is refused for good.
func TestSendClassifiesAnswers(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		name    string
		key     string
		fault   *fake.LLMFault
		body    string
		outcome ops.Outcome
		code    string
		billed  int
	}{
		{"429", apiKey, &fake.LLMFault{Kind: fake.LLMFaultRateLimit, RetryAfter: 7}, body, ops.OutcomeRateLimited, "upstream_rate_limited", 0},
		{"529 overloaded", apiKey, &fake.LLMFault{Kind: fake.LLMFaultOverloaded}, body, ops.OutcomeRateLimited, "upstream_overloaded", 0},
		{"500", apiKey, &fake.LLMFault{Kind: fake.LLMFaultServerError}, body, ops.OutcomeTimeout, "upstream_500", 0},
		{"billed, then no answer", apiKey, &fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second}, body, ops.OutcomeTimeout, "upstream_timeout", 1},
		{"400", apiKey, nil, `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"x"}]}`, ops.OutcomeInvalid, "upstream_refused", 0},
		{"401", "sk-ant-admin01-settle-test", nil, body, ops.OutcomeInvalid, "upstream_auth", 0},
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			f, c := startWith(t, row.key)
			if row.fault != nil {
				f.AddFault(*row.fault)
			}
			r := c.Send(context.Background(), llm.Call{Body: []byte(row.body)})
			if r.Outcome != row.outcome || r.ErrorCode != row.code || len(f.Generations()) != row.billed {
				t.Fatalf("got %+v with %d billed; want %s %s, %d billed", r, len(f.Generations()), row.outcome, row.code, row.billed)
			}
			if row.name == "429" && r.RetryAfter != 7*time.Second {
				t.Fatalf("retry after %s", r.RetryAfter)
			}
			if row.name == "400" && (r.HTTPStatus != http.StatusBadRequest || r.Message != "max_tokens: Field required") {
				t.Fatalf("refusal %d %q", r.HTTPStatus, r.Message)
			}
		})
	}
}

// TestSendStreams: a stream that reaches message_stop ends well; one cut off before it, or
// broken by an error event, is uncertain: the provider billed it.
func TestSendStreams(t *testing.T) {
	t.Parallel()
	sbody := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, row := range []struct {
		name  string
		fault *fake.LLMFault
		code  string
	}{
		{"whole", nil, ""},
		{"cut", &fake.LLMFault{Kind: fake.LLMFaultDropStream, Chunk: 4}, "stream_broken"},
		{"error event", &fake.LLMFault{Kind: fake.LLMFaultOverloaded, Chunk: 4}, "upstream_stream_error"},
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			f, c := start(t)
			if row.fault != nil {
				f.AddFault(*row.fault)
			}
			call := llm.Call{Body: []byte(sbody)}
			types := stream(&call)
			r := c.Send(context.Background(), call)
			want := ops.OutcomeOK
			if row.code != "" {
				want = ops.OutcomeTimeout
			}
			if r.Outcome != want || r.ErrorCode != row.code || len(f.Generations()) != 1 {
				t.Fatalf("got %+v after %v", r, *types)
			}
			if (*types)[0] != "message_start" || (row.code == "" && (*types)[len(*types)-1] != "message_stop") {
				t.Fatalf("events %v", *types)
			}
		})
	}
}
