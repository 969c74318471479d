package llm

import (
	"encoding/json"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// CallOf is the API and model of an LLM operation, read from the request it stored: a
// gateway call keeps its route beside the client's body, a job's generation keeps the body
// it sent to chat completions. A request the purge deleted names no model, and its route is
// then unknown too unless the operation is a job's.
func CallOf(op *ops.Operation) ops.Call {
	var s struct {
		Route string `json:"route"`
		Body  struct {
			Model string `json:"model"`
		} `json:"body"`
	}
	if len(op.Request) == 0 || json.Unmarshal(op.Request, &s) != nil {
		if Kind().Of(op) {
			return ops.Call{}
		}
		return ops.Call{API: APIName(chatRoute)}
	}
	if s.Route == "" {
		s.Route = chatRoute
	}
	return ops.Call{API: APIName(s.Route), Model: s.Body.Model}
}

// APIName names a gateway route in words, as pages show it: /v1/chat/completions is "chat
// completions", /v1/responses "responses".
func APIName(route string) string {
	return strings.ReplaceAll(strings.TrimPrefix(route, "/v1/"), "/", " ")
}

// APILabel names a gateway route as a metric label value: /v1/chat/completions is
// "chat_completions".
func APILabel(route string) string {
	return strings.ReplaceAll(APIName(route), " ", "_")
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
