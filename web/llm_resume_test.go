package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	anthropicup "github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	openaiup "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/web"
)

// resumePace is the pause between two events of the fakes' streams: a reply of 24 words
// takes over a second, long enough for a client to break its stream and retry while the
// generation is still running.
const resumePace = 50 * time.Millisecond

// resumeWorld is one gateway serving the three streaming APIs on one database: chat
// completions and responses from the fake LLM, messages from the fake Anthropic.
type resumeWorld struct {
	world   *testworld.World
	db      *pg.DB
	llm     *fake.LLM
	ant     *fake.Anthropic
	llmBase string
	antBase string
	gw      *llm.Gateway
	url     string
	token   string
	// tokens are the tenants' tokens: shop is interactive, pipeline batch.
	tokens map[string]string
}

func newResumeWorld(t *testing.T) *resumeWorld {
	t.Helper()
	s, tw := newServer(t)
	w := &resumeWorld{world: tw, db: tw.DB}
	w.llm, w.llmBase = tw.LLM(fake.LLMOptions{Seed: 1, ChunkDelay: resumePace})
	w.ant = fake.NewAnthropic(fake.AnthropicOptions{ChunkDelay: resumePace, Words: 24})
	var err error
	if w.antBase, err = w.ant.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.ant.Close() })
	w.gw, w.url = w.gateway(t, s)
	w.tokens = map[string]string{}
	for _, name := range []string{"shop", "pipeline"} {
		w.tokens[name] = tw.Token(tw.Tenant(name), "test")
	}
	w.token = w.tokens["shop"]
	return w
}

// as is the world as a tenant's client sees it.
func (w *resumeWorld) as(tenant string) *resumeWorld {
	c := *w
	c.token = w.tokens[tenant]
	return &c
}

// gateway starts a gateway process on the world's database and providers, served by s.
func (w *resumeWorld) gateway(t *testing.T, s *web.Server) (*llm.Gateway, string) {
	t.Helper()
	up := w.world.Upstream(w.llmBase, openaiup.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
	ant, err := anthropicup.New(anthropicup.Config{BaseURL: w.antBase, APIKey: upstreamKey})
	if err != nil {
		t.Fatal(err)
	}
	ledger := w.world.Ledger(ops.NewManualClock(time.Now()))
	gw, err := llm.New(llm.Config{Ledger: ledger, Upstream: up, Upstreams: map[string]llm.Upstream{llm.MessagesRoute: ant},
		Prices: llm.DefaultPrices(), TenantModes: map[string]llm.Mode{"pipeline": llm.Batch}, Refs: w.db, Streams: w.db})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM = gw
	return gw, w.world.Serve(s.Handler())
}

// streamAPI is one of the gateway's streaming APIs as a client sees it.
type streamAPI struct {
	name, path string
	// body is a streaming request of q in the API's raw JSON.
	body func(q string) string
	// text is the text one event's data adds to the answer.
	text func(data string) string
	// sdk streams q with the key through the API's official SDK, without retries, and
	// returns the text of each event read; it stops reading (and breaks the connection)
	// after cut events when cut > 0. at is called with the first event.
	sdk func(w *resumeWorld, q, key string, cut int, at func()) (texts []string, hdr http.Header, err error)
	// generations are the texts the provider billed for this API, oldest first.
	generations func(w *resumeWorld) []string
}

var streamAPIs = []streamAPI{
	{name: "chat completions", path: "/v1/chat/completions",
		body: func(q string) string { return chatBody(q, 0.2, true) },
		text: func(data string) string {
			var ch openai.ChatCompletionChunk
			if json.Unmarshal([]byte(data), &ch) != nil || len(ch.Choices) == 0 {
				return ""
			}
			return ch.Choices[0].Delta.Content
		},
		sdk: func(w *resumeWorld, q, key string, cut int, at func()) ([]string, http.Header, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.token), option.WithMaxRetries(0))
			var raw *http.Response
			s := c.Chat.Completions.NewStreaming(ctx, ask(q, 0.2), keyed(key), option.WithResponseInto(&raw))
			defer s.Close()
			return readSDK(s.Next, func() string {
				if ch := s.Current(); len(ch.Choices) > 0 {
					return ch.Choices[0].Delta.Content
				}
				return ""
			}, s.Err, cut, at, cancel, &raw)
		},
		generations: func(w *resumeWorld) []string { return contents(w.llm.GenerationsOf(fake.APIChatCompletions)) }},
	{name: "responses", path: "/v1/responses",
		body: func(q string) string {
			b, _ := json.Marshal(map[string]any{"model": "fake-small", "input": q, "stream": true})
			return string(b)
		},
		text: func(data string) string {
			var ev struct{ Type, Delta string }
			if json.Unmarshal([]byte(data), &ev) != nil || ev.Type != "response.output_text.delta" {
				return ""
			}
			return ev.Delta
		},
		sdk: func(w *resumeWorld, q, key string, cut int, at func()) ([]string, http.Header, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.token), option.WithMaxRetries(0))
			var raw *http.Response
			s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "fake-small",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)}}, keyed(key), option.WithResponseInto(&raw))
			defer s.Close()
			return readSDK(s.Next, func() string {
				if ev := s.Current(); ev.Type == "response.output_text.delta" {
					return ev.Delta
				}
				return ""
			}, s.Err, cut, at, cancel, &raw)
		},
		generations: func(w *resumeWorld) []string { return contents(w.llm.GenerationsOf(fake.APIResponses)) }},
	{name: "messages", path: "/v1/messages",
		body: func(q string) string {
			b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": true,
				"messages": []map[string]string{{"role": "user", "content": q}}})
			return string(b)
		},
		text: func(data string) string {
			var ev struct {
				Type  string
				Delta struct{ Type, Text string }
			}
			if json.Unmarshal([]byte(data), &ev) != nil || ev.Type != "content_block_delta" || ev.Delta.Type != "text_delta" {
				return ""
			}
			return ev.Delta.Text
		},
		sdk: func(w *resumeWorld, q, key string, cut int, at func()) ([]string, http.Header, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := anthropic.NewClient(aoption.WithBaseURL(w.url), aoption.WithAPIKey(w.token), aoption.WithMaxRetries(0))
			var raw *http.Response
			s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))}},
				aoption.WithHeader("Idempotency-Key", key), aoption.WithResponseInto(&raw))
			defer s.Close()
			return readSDK(s.Next, func() string {
				if ev := s.Current(); ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					return ev.Delta.Text
				}
				return ""
			}, s.Err, cut, at, cancel, &raw)
		},
		generations: func(w *resumeWorld) []string {
			var out []string
			for _, g := range w.ant.Generations() {
				out = append(out, g.Content)
			}
			return out
		}},
}

func contents(gens []fake.Generation) []string {
	var out []string
	for _, g := range gens {
		out = append(out, g.Content)
	}
	return out
}

// readSDK reads an SDK's stream: the text of each event, up to cut events when cut > 0, after
// which it breaks the connection as a client whose network failed.
func readSDK(next func() bool, text func() string, errOf func() error, cut int, at func(), cancel func(), raw **http.Response) ([]string, http.Header, error) {
	var texts []string
	for next() {
		if len(texts) == 0 && at != nil {
			at()
		}
		texts = append(texts, text())
		if cut > 0 && len(texts) == cut {
			cancel()
			break
		}
	}
	var hdr http.Header
	if *raw != nil {
		hdr = (*raw).Header
	}
	if cut > 0 && len(texts) == cut {
		return texts, hdr, nil
	}
	return texts, hdr, errOf()
}

// sseEvent is one server-sent event as it arrived: its fields and its bytes.
type sseEvent struct {
	id, event, data string
	raw             string
}

// readEvents reads server-sent events from r, at most max when max > 0; a line that ends the
// stream without an event ([DONE]) is returned as an event too.
func readEvents(t *testing.T, r io.Reader, max int) []sseEvent {
	t.Helper()
	br := bufio.NewReader(r)
	var out []sseEvent
	var ev sseEvent
	for max <= 0 || len(out) < max {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		ev.raw += line
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			out = append(out, ev)
			ev = sseEvent{}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			ev.data = value
		}
	}
	return out
}

func raws(evs []sseEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.raw)
	}
	return b.String()
}

// post sends a raw streaming request of api with the key and hdr as pairs of names and
// values; cancelling ctx breaks the connection.
func (w *resumeWorld) post(t *testing.T, ctx context.Context, api streamAPI, key, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.url+api.path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// cut sends a streaming request, reads n events and breaks the connection, as a client whose
// network failed; it returns the events read.
func (w *resumeWorld) cut(t *testing.T, api streamAPI, key, body string, n int) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := w.post(t, ctx, api, key, body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("first request: %d %s", resp.StatusCode, b)
	}
	evs := readEvents(t, resp.Body, n)
	if len(evs) != n {
		t.Fatalf("read %d events before the cut, want %d", len(evs), n)
	}
	return evs
}

// op is the operation of key: every key of these tests opens one operation, so the latest
// is the only one.
func (w *resumeWorld) op(t *testing.T, key string) *ops.Operation {
	t.Helper()
	return w.world.Operation(t, key)
}

// waitStatus allows 15 s rather than the 10 s of the other LLM worlds: these streams are
// paced at resumePace an event, and the wait has always been this long here.
func (w *resumeWorld) waitStatus(t *testing.T, key string, status ops.Status) *ops.Operation {
	t.Helper()
	return w.world.WaitStatus(t, key, status, 15*time.Second)
}

// wantOne checks the provider billed one generation of the API and returns its text.
func (w *resumeWorld) wantOne(t *testing.T, api streamAPI) string {
	t.Helper()
	gens := api.generations(w)
	if len(gens) != 1 {
		t.Fatalf("the provider generated %d answers, want 1", len(gens))
	}
	return gens[0]
}

func (api streamAPI) join(evs []sseEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(api.text(e.data))
	}
	return b.String()
}

// eventNumber splits an event id Settle gave, attempt-n, into its attempt and its number.
func eventNumber(t *testing.T, id string) (attempt, n int) {
	t.Helper()
	a, b, ok := strings.Cut(id, "-")
	attempt, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("event id %q is not attempt-n", id)
	}
	return attempt, n
}

// wantNumbered checks that every relayed event carries an id and that the ids count on from
// after, one by one, within one attempt.
func wantNumbered(t *testing.T, evs []sseEvent, after string) {
	t.Helper()
	attempt, n := 1, 0
	if after != "" {
		attempt, n = eventNumber(t, after)
	}
	for _, e := range evs {
		if e.data == "[DONE]" {
			continue
		}
		a, m := eventNumber(t, e.id)
		if a != attempt || m != n+1 {
			t.Fatalf("event %q follows %d-%d", e.id, attempt, n)
		}
		n = m
	}
}

// TestStreamRetryFollowsTheLiveGeneration: a client whose stream broke while the provider was
// still generating retries with the same Idempotency-Key through the API's official SDK, with
// no retries of the SDK's own, and receives the ongoing generation live from its first event
// (it sent no Last-Event-ID, so nothing it saw is trusted): no 409, no second generation, the
// provider's text exactly (ops rule 3).
func TestStreamRetryFollowsTheLiveGeneration(t *testing.T) {
	t.Parallel()
	w := newResumeWorld(t)
	for i, api := range streamAPIs {
		t.Run(api.name, func(t *testing.T) {
			key := fmt.Sprintf("live-%d", i)
			q := "summarise ticket " + strconv.Itoa(i)
			first, _, err := api.sdk(w, q, key, 5, nil)
			if err != nil || len(first) != 5 {
				t.Fatalf("the first stream: %d events, %v", len(first), err)
			}
			var during ops.Status
			texts, hdr, err := api.sdk(w, q, key, 0, func() { during = w.op(t, key).Status })
			if err != nil {
				t.Fatalf("the retry: %v", err)
			}
			text := w.wantOne(t, api)
			if strings.Join(texts, "") != text || hdr.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the retry streamed %q (replayed %q); the provider generated %q", strings.Join(texts, ""), hdr.Get("Idempotent-Replayed"), text)
			}
			if during != ops.StatusInProgress {
				t.Fatalf("the retry's first event came when the operation was %s: not live", during)
			}
			if op := w.waitStatus(t, key, ops.StatusSucceeded); op.Attempts != 1 {
				t.Fatalf("operation %s took %d attempts", op.ID, op.Attempts)
			}
			w.wantOne(t, api)
		})
	}
}

// TestStreamRetryResumesAfterLastEventID: every event Settle relays carries an id; a client
// whose stream broke retries with the key and Last-Event-ID and receives, live, the events
// after the one it names and nothing before, so what it read and what it receives make the
// provider's text exactly. Once the generation is over, the key replays the original events,
// byte for byte, from the first or after a Last-Event-ID (ops rule 3).
func TestStreamRetryResumesAfterLastEventID(t *testing.T) {
	t.Parallel()
	w := newResumeWorld(t)
	for i, api := range streamAPIs {
		t.Run(api.name, func(t *testing.T) {
			key := fmt.Sprintf("resume-%d", i)
			body := api.body("draft the reply to ticket " + strconv.Itoa(i))
			seen := w.cut(t, api, key, body, 6)
			wantNumbered(t, seen, "")
			last := seen[len(seen)-1].id
			if op := w.op(t, key); op.Status != ops.StatusInProgress {
				t.Fatalf("the generation ended before the retry (operation %s): not a live resume", op.Status)
			}
			resp := w.post(t, context.Background(), api, key, body, "Last-Event-ID", last)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "true" || resp.Header.Get("Settle-Resumed-After") != last {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("the retry: %d %v %s", resp.StatusCode, resp.Header, b)
			}
			rest := readEvents(t, resp.Body, 0)
			wantNumbered(t, rest, last)
			text := w.wantOne(t, api)
			if got := api.join(seen) + api.join(rest); got != text {
				t.Fatalf("read %q then %q; the provider generated %q", api.join(seen), api.join(rest), text)
			}
			w.waitStatus(t, key, ops.StatusSucceeded)

			// After the generation: the original events again, byte for byte.
			all := append(append([]sseEvent(nil), seen...), rest...)
			replay := w.post(t, context.Background(), api, key, body)
			if b, _ := io.ReadAll(replay.Body); string(b) != raws(all) || replay.Header.Get("Idempotent-Replayed") != "true" || replay.Header.Get("Settle-Resumed-After") != "" {
				t.Fatalf("the replay:\n%s\nthe stream:\n%s", b, raws(all))
			}
			mid := all[9].id
			replay = w.post(t, context.Background(), api, key, body, "Last-Event-ID", mid)
			if b, _ := io.ReadAll(replay.Body); string(b) != raws(all[10:]) || replay.Header.Get("Settle-Resumed-After") != mid {
				t.Fatalf("the replay after %s:\n%s\nwant:\n%s", mid, b, raws(all[10:]))
			}
			w.wantOne(t, api)
		})
	}
}

// TestStreamReplayKeepsTheOriginalEvents: a stream that reached its client whole is replayed to
// a repeat of the key as the events the provider sent, with their ids, byte for byte, not
// rebuilt from the stored answer; a repeat that asks for JSON still gets the stored answer.
func TestStreamReplayKeepsTheOriginalEvents(t *testing.T) {
	t.Parallel()
	w := newResumeWorld(t)
	for i, api := range streamAPIs {
		t.Run(api.name, func(t *testing.T) {
			key := fmt.Sprintf("whole-%d", i)
			body := api.body("list the open tickets " + strconv.Itoa(i))
			first, err := io.ReadAll(w.post(t, context.Background(), api, key, body).Body)
			if err != nil {
				t.Fatal(err)
			}
			evs := readEvents(t, strings.NewReader(string(first)), 0)
			wantNumbered(t, evs, "")
			w.waitStatus(t, key, ops.StatusSucceeded)
			replay := w.post(t, context.Background(), api, key, body)
			b, _ := io.ReadAll(replay.Body)
			if string(b) != string(first) || replay.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the replay:\n%s\nthe stream:\n%s", b, first)
			}
			if text := w.wantOne(t, api); api.join(evs) != text {
				t.Fatalf("streamed %q; the provider generated %q", api.join(evs), text)
			}
		})
	}
}

// TestStreamRetryOnAnotherReplica: the generation runs in one gateway process; a retry that
// reaches another replica while it runs cannot follow it there and is told 409 with
// Retry-After, as any request on a key in flight; with Prefer: wait it waits there for the end.
// Once it is over, the other replica replays the stored events after the client's
// Last-Event-ID, and nothing is generated again (ops rule 3).
func TestStreamRetryOnAnotherReplica(t *testing.T) {
	t.Parallel()
	w := newResumeWorld(t)
	_, other := w.gateway(t, w.world.Server(ops.NewManualClock(t0)))
	api := streamAPIs[0]
	body := api.body("summarise the call")
	seen := w.cut(t, api, "replica-1", body, 4)
	last := seen[len(seen)-1].id
	elsewhere := &resumeWorld{url: other, token: w.token}
	busy := elsewhere.post(t, context.Background(), api, "replica-1", body, "Last-Event-ID", last)
	if busy.StatusCode != http.StatusConflict || busy.Header.Get("Retry-After") != "1" {
		b, _ := io.ReadAll(busy.Body)
		t.Fatalf("another replica mid-generation: %d %v %s", busy.StatusCode, busy.Header, b)
	}
	// With Prefer: wait, the other replica waits for the generation to end, then sends the
	// stored events after Last-Event-ID.
	waited := elsewhere.post(t, context.Background(), api, "replica-1", body, "Last-Event-ID", last, "Prefer", "wait=20")
	rest := readEvents(t, waited.Body, 0)
	wantNumbered(t, rest, last)
	text := w.wantOne(t, api)
	if api.join(seen)+api.join(rest) != text || waited.Header.Get("Settle-Resumed-After") != last || waited.Header.Get("Preference-Applied") != "wait=20" {
		t.Fatalf("waited %v: read %q then %q; the provider generated %q", waited.Header, api.join(seen), api.join(rest), text)
	}
	// And once it ended, a retry without Prefer gets the same events.
	w.waitStatus(t, "replica-1", ops.StatusSucceeded)
	resp := elsewhere.post(t, context.Background(), api, "replica-1", body, "Last-Event-ID", last)
	if b, _ := io.ReadAll(resp.Body); string(b) != raws(rest) || resp.Header.Get("Settle-Resumed-After") != last {
		t.Fatalf("the retry after the end:\n%s\nwant:\n%s", b, raws(rest))
	}
	w.wantOne(t, api)
}

// TestFollowedMessagesStreamCutByAnthropic: Anthropic cuts a message's stream while a retry
// follows it live. Nothing can complete it (Anthropic keeps no message to read again), so the
// follower, like the first client, gets the events that came and then an error that says so,
// never a message_stop: no partial text passes for a finished message (ops rule 12). An
// interactive call's retry is then sent again, a possible duplicate, and a Last-Event-ID from
// the broken stream names no event of the new one: it comes from its first event, without
// Settle-Resumed-After, so the client knows to start its text over.
func TestFollowedMessagesStreamCutByAnthropic(t *testing.T) {
	t.Parallel()
	w := newResumeWorld(t)
	api := streamAPIs[2]
	for _, tenant := range []string{"pipeline", "shop"} {
		t.Run(tenant, func(t *testing.T) {
			c := w.as(tenant)
			key, body := "cut-"+tenant, api.body("summarise document 9 for "+tenant)
			before := len(api.generations(w))
			w.ant.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultDropStream, Chunk: 14, Times: 1})
			seen := c.cut(t, api, key, body, 5)
			resp := c.post(t, context.Background(), api, key, body, "Last-Event-ID", seen[4].id)
			rest := readEvents(t, resp.Body, 0)
			if resp.Header.Get("Settle-Resumed-After") != seen[4].id || len(rest) == 0 {
				t.Fatalf("the follower: %v %s", resp.Header, raws(rest))
			}
			end := rest[len(rest)-1]
			if end.event != "error" || strings.Contains(raws(rest), "message_stop") || end.id != "" {
				t.Fatalf("the followed stream ended:\n%s", raws(rest))
			}
			if tenant == "pipeline" {
				if !strings.Contains(end.data, "neither fetched nor completed") || w.op(t, key).Status != ops.StatusUnknown {
					t.Fatalf("the followed stream ended with %s", end.data)
				}
				if n := len(api.generations(w)) - before; n != 1 {
					t.Fatalf("Anthropic generated %d messages, want 1", n)
				}
				return
			}
			if !strings.Contains(end.data, "ended before its answer was whole") {
				t.Fatalf("the followed stream ended with %s", end.data)
			}
			again := c.post(t, context.Background(), api, key, body, "Last-Event-ID", rest[len(rest)-2].id)
			evs := readEvents(t, again.Body, 0)
			gens := api.generations(w)
			if again.Header.Get("Settle-Resumed-After") != "" || evs[0].id != "2-1" || api.join(evs) != gens[len(gens)-1] || len(gens)-before != 2 {
				t.Fatalf("the retry after the cut: %v\n%s", again.Header, raws(evs))
			}
		})
	}
}
