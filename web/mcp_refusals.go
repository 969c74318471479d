package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/mcptool"
)

// mcpRefusals stands in front of the SDK's handler. It stamps every tools/call with its
// JSON-RPC id, which the SDK keeps from tool handlers and which becomes the recorded
// request_ref when the client sends no tool call id. And since the SDK refuses some tool
// calls before any tool sees them (an unknown tool, a message it cannot read, a batch its
// protocol version does not allow, a body over the limit), it records each such call as
// its tenant's refused request (ops rule 8) and answers it with what was wrong. Settle's
// tools answer every call they see with a result, never a JSON-RPC error, so a call the SDK
// answered otherwise never reached one. Messages that are no tool call pass through as they
// are.
func (s *Server) mcpRefusals(tools *mcptool.Tools) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.Body == nil {
				next.ServeHTTP(w, r)
				return
			}
			// Never more than the limit and one byte is read: a larger body is refused from
			// its first bytes.
			body, err := io.ReadAll(io.LimitReader(r.Body, mcpMaxBody+1))
			if err != nil {
				http.Error(w, "could not read the request body", http.StatusBadRequest)
				return
			}
			r.Body.Close()
			calls := mcptool.ToolCalls(body)
			if int64(len(body)) > mcpMaxBody {
				s.refuseMCPBody(w, r, tools, calls)
				return
			}
			body = mcptool.StampMessage(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
			if len(calls) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			release, ok := s.mcpBatchPlaces(w, r, tools, calls)
			if !ok {
				return
			}
			defer release()
			// The SDK answers in one JSON write (JSONResponse), so its answer is held until
			// the refused calls in it are recorded and their errors say so.
			held := &heldAnswer{header: http.Header{}, status: http.StatusOK}
			next.ServeHTTP(held, r)
			s.answerMCP(w, r, tools, calls, held)
		})
	}
}

// refuseMCPBody answers a body over the limit, recording each tool call its first bytes
// show. The answer is a JSON-RPC error with the status of the refusal, or of the outage
// that kept a call from being recorded.
func (s *Server) refuseMCPBody(w http.ResponseWriter, r *http.Request, tools *mcptool.Tools, calls []mcptool.ToolCall) {
	s.refuseMCPCalls(w, r, tools, calls, &ops.Error{Code: ETOOLARGE, Reason: "body_too_large", Message: fmt.Sprintf("The body is over %d bytes.", mcpMaxBody)})
}

// answerMCP records the calls the SDK refused (those its held answer gives no result) and
// writes the answer, with each refused call's error saying what was wrong and that it sent
// nothing, or the outage that kept it from being recorded.
func (s *Server) answerMCP(w http.ResponseWriter, r *http.Request, tools *mcptool.Tools, calls []mcptool.ToolCall, held *heldAnswer) {
	answers, batch, inBand := decodeRPCAnswers(held.body.Bytes())
	texts := map[string]string{}
	var last error
	for _, c := range calls {
		key := mcptool.IDKey(c.ID)
		a, ok := answers[key]
		if key != "" && ok && a.Error == nil {
			continue
		}
		what := firstLine(held.body.String())
		if ok && a.Error != nil {
			what = a.Error.Message
		}
		last = tools.RefuseCall(r.Context(), tenantFrom(r.Context()).ID, c, mcptool.CallRefusal(c, what, !inBand))
		texts[key] = mcptool.RefusalText(last)
	}
	if len(texts) == 0 {
		held.copyTo(w, held.body.Bytes())
		return
	}
	if !inBand {
		status := held.status
		if ops.Unreachable(last) {
			status, _ = statusOf(last)
		}
		writeRPCError(w, status, onlyID(calls), mcptool.RefusalText(last))
		return
	}
	held.copyTo(w, encodeRPCAnswers(answers, batch, texts))
}

// heldAnswer is the SDK's answer, held until the calls it refused are recorded.
type heldAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldAnswer) Header() http.Header         { return h.header }
func (h *heldAnswer) WriteHeader(status int)      { h.status = status }
func (h *heldAnswer) Write(p []byte) (int, error) { return h.body.Write(p) }

// copyTo writes the held answer with body in place of its own.
func (h *heldAnswer) copyTo(w http.ResponseWriter, body []byte) {
	for k, v := range h.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(h.status)
	_, _ = w.Write(body)
}

// rpcAnswer is one JSON-RPC response, its result kept as sent.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcFault       `json:"error,omitempty"`
}

// rpcFault is a JSON-RPC error object.
type rpcFault struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// decodeRPCAnswers reads the SDK's answer as JSON-RPC responses keyed by id (in their
// order under the key "#n" as well, so they can be written back), whether it was a batch,
// and whether it was JSON-RPC at all rather than a refusal of the whole HTTP request.
func decodeRPCAnswers(body []byte) (map[string]rpcAnswer, bool, bool) {
	var list []rpcAnswer
	batch := true
	if json.Unmarshal(body, &list) != nil {
		var one rpcAnswer
		if json.Unmarshal(body, &one) != nil || one.JSONRPC == "" {
			return nil, false, false
		}
		list, batch = []rpcAnswer{one}, false
	}
	answers := map[string]rpcAnswer{}
	for i, a := range list {
		answers["#"+strconv.Itoa(i)] = a
		if k := mcptool.IDKey(a.ID); k != "" {
			answers[k] = a
		}
	}
	return answers, batch, true
}

// encodeRPCAnswers writes the responses back in their order, the error of each refused
// call replaced by texts.
func encodeRPCAnswers(answers map[string]rpcAnswer, batch bool, texts map[string]string) []byte {
	var list []rpcAnswer
	for i := 0; ; i++ {
		a, ok := answers["#"+strconv.Itoa(i)]
		if !ok {
			break
		}
		if t, ok := texts[mcptool.IDKey(a.ID)]; ok && a.Error != nil {
			a.Error = &rpcFault{Code: a.Error.Code, Message: t}
		}
		list = append(list, a)
	}
	var out []byte
	if batch {
		out, _ = json.Marshal(list)
	} else if len(list) == 1 {
		out, _ = json.Marshal(list[0])
	}
	return out
}

// codeInvalidRequest is JSON-RPC's code of a request the server cannot take.
const codeInvalidRequest = -32600

// writeRPCError answers a whole HTTP request with one JSON-RPC error.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, msg string) {
	b, _ := json.Marshal(rpcAnswer{JSONRPC: "2.0", ID: id, Error: &rpcFault{Code: codeInvalidRequest, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// onlyID is the id of the one call a request made, or null when it made several or its id
// cannot be read.
func onlyID(calls []mcptool.ToolCall) json.RawMessage {
	if len(calls) == 1 && mcptool.IDKey(calls[0].ID) != "" {
		return json.RawMessage(mcptool.IDKey(calls[0].ID))
	}
	return json.RawMessage("null")
}

// firstLine is the first line of the SDK's plain refusal, cut to what an error repeats.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200])
	}
	return s
}
