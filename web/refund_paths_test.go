package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
)

// postRefund posts one refund intent to the JSON API and decodes its answer.
func postRefund(e *mcpEnv, body map[string]any) (int, refund.Answer, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/refunds", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, refund.Answer{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a refund.Answer
	_ = json.Unmarshal(raw, &a)
	return resp.StatusCode, a, nil
}

// mcpRefund calls issue_refund with args (and meta) on a session of its own, as an agent's
// call does, and returns the structured answer; err also reports a result marked as an error,
// whose answer is returned too.
func mcpRefund(t *testing.T, e *mcpEnv, args map[string]any, meta mcp.Meta) (refund.Answer, error) {
	cs, err := e.connect(t, e.token)
	if err != nil {
		return refund.Answer{}, err
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "issue_refund", Arguments: args, Meta: meta})
	if err != nil {
		return refund.Answer{}, err
	}
	var a refund.Answer
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &a)
	if res.IsError {
		return a, fmt.Errorf("tool error: %+v", res.Content)
	}
	return a, nil
}

// TestOneIntentThroughTheAPIAndMCPAtOnceRefundsOnce: the same refund intent sent at the same
// moment through POST /api/v1/refunds and the MCP tool, half of the calls with another
// reason, while Stripe is slow. The two paths make one operation and one refund (ops rules
// 2 and 3); every call is answered with that operation, none failed or checking, those with
// the other reason are told their parameters were not used (ops rule 12), and every call is
// recorded (ops rule 8).
func TestOneIntentThroughTheAPIAndMCPAtOnceRefundsOnce(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, 2*time.Second, 6*time.Second)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 300 * time.Millisecond})
	const n = 8
	answers := make([]refund.Answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		args := storyArgs()
		if i%4 >= 2 {
			args["reason"] = "duplicate"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				args["request_ref"] = fmt.Sprintf("api-%d", i)
				code, a, err := postRefund(e, args)
				if err != nil || code != http.StatusOK {
					t.Errorf("API call %d: %d %v", i, code, err)
				}
				answers[i] = a
				return
			}
			a, err := mcpRefund(t, e, args, mcp.Meta{"toolCallId": fmt.Sprintf("toolu_%d", i)})
			if err != nil {
				t.Errorf("MCP call %d: %v", i, err)
			}
			answers[i] = a
		}()
	}
	close(start)
	wg.Wait()
	opIDs := map[string]bool{}
	for i, a := range answers {
		if a.Status != refund.Refunded && a.Status != refund.Unconfirmed {
			t.Errorf("call %d answered %+v", i, a)
		}
		opIDs[a.OperationID] = true
	}
	if len(opIDs) != 1 {
		t.Fatalf("%d operations answered, want 1: %+v", len(opIDs), answers)
	}
	winner := e.count(t, `SELECT count(*) FROM operations WHERE request->>'reason' = 'duplicate'`) == 1
	for i, a := range answers {
		other := (i%4 >= 2) != winner
		if other != strings.Contains(a.Note, "other parameters were not used") {
			t.Errorf("call %d (other reason: %v) noted %q", i, other, a.Note)
		}
	}
	if got := len(e.fake.Refunds()); got != 1 {
		t.Fatalf("%d refunds at the fake, want 1", got)
	}
	if got := e.count(t, `SELECT count(*) FROM operations`); got != 1 {
		t.Fatalf("%d operations, want 1", got)
	}
	if got := e.count(t, `SELECT count(*) FROM client_requests WHERE request_ref LIKE 'api-%' OR request_ref LIKE 'toolu_%'`); got != n {
		t.Fatalf("%d client requests recorded, want %d", got, n)
	}
}

// TestRetriesOfAnUnknownRefundThroughTheAPIAndMCPSendNothing: Stripe saved a 500 under the
// operation's key, so its outcome is unknown; the client then retries at once through both
// the API and the MCP tool, with and without another reason. Every retry is answered
// checking with that operation and nothing more is sent (ops rules 5 and 12).
func TestRetriesOfAnUnknownRefundThroughTheAPIAndMCPSendNothing(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultServerError})
	code, first, err := postRefund(e, storyArgs())
	if err != nil || code != http.StatusOK || first.Status != refund.Checking {
		t.Fatalf("first call: %d %+v %v", code, first, err)
	}
	const n = 6
	answers := make([]refund.Answer, n)
	var wg sync.WaitGroup
	for i := range n {
		args := storyArgs()
		if i%4 >= 2 {
			args["reason"] = "fraudulent"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				_, answers[i], _ = postRefund(e, args)
				return
			}
			a, err := mcpRefund(t, e, args, nil)
			if err != nil && a.OperationID == "" {
				t.Error(err)
			}
			answers[i] = a
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.Status != refund.Checking || a.OperationID != first.OperationID {
			t.Errorf("retry %d answered %+v, want checking on %s", i, a, first.OperationID)
		}
	}
	if got := e.count(t, `SELECT count(*) FROM attempts`); got != 1 {
		t.Fatalf("%d attempts, want the first one only", got)
	}
	if got := len(e.fake.Refunds()); got != 0 {
		t.Fatalf("%d refunds at the fake, want none", got)
	}
}
