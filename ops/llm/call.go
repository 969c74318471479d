package llm

import (
	"encoding/json"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// CallOf is the API and model of an LLM operation. Both are kept on the operation's row from
// its opening, so they outlive the purge of its request. An operation not yet opened (the
// ledger asks CallOf for the API the opening writes) reads them from the request it stores:
// a gateway call keeps its route beside the client's body, a job's generation keeps the body
// it sent to chat completions. A call purged before its row kept its model names none.
func CallOf(op *ops.Operation) ops.Call {
	c := ops.Call{API: strings.ReplaceAll(op.API, "_", " "), Model: op.Model}
	var s struct {
		Route string `json:"route"`
		Body  struct {
			Model string `json:"model"`
		} `json:"body"`
	}
	if len(op.Request) == 0 || json.Unmarshal(op.Request, &s) != nil {
		if c.API == "" && !Kind().Of(op) {
			c.API = ChatAPI()
		}
		return c
	}
	if s.Route == "" {
		s.Route = chatRoute
	}
	if c.API == "" {
		c.API = APIName(s.Route)
	}
	if c.Model == "" {
		c.Model = s.Body.Model
	}
	return c
}

// APIName names a gateway route in words, as pages show it: /v1/chat/completions is "chat
// completions", /v1/responses "responses".
func APIName(route string) string {
	return strings.ReplaceAll(strings.TrimPrefix(route, "/v1/"), "/", " ")
}

// APINames names, as pages show them, the APIs the gateway serves: an llm_call calls one of
// them, and the pages split their counts by them.
func APINames() []string {
	out := make([]string, 0, len(apis))
	for _, a := range apis {
		out = append(out, APIName(a.route()))
	}
	return out
}

// ChatAPI names the API of chat completions as pages show it: the only API a pipeline job's
// generation calls.
func ChatAPI() string { return APIName(chatRoute) }
