package main

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// gatewayAPI is one route the gateway benchmark offers its traffic on: the same requests,
// the same way, to the fake that serves the route, through the proxy and through Settle.
type gatewayAPI struct {
	// name is how -apis names it.
	name string
	// route is the request's path, the same at the fake, the proxy and Settle.
	route string
	// bodies are the unstreamed and the streamed request; the second is nil for an API that
	// does not stream, whose requests are all unstreamed.
	bodies [2][]byte
	// header is sent besides the token, the key and the content type.
	header http.Header
	// end reports whether an event's data ends its stream well, or in failure.
	end func(data []byte) (done, failed bool)
}

// streams reports whether half of the API's requests stream.
func (a *gatewayAPI) streams() bool { return a.bodies[1] != nil }

// question is what every request asks: a short question, the same every time, so the fakes'
// and Settle's work per request does not grow with the run.
const question = "How long does a refund take to reach my card?"

// gatewayAPIs are the routes the benchmark knows, in the order it offers them: chat
// completions first, as the benchmark measured them alone before the others.
var gatewayAPIs = []*gatewayAPI{
	{name: "chat", route: "/v1/chat/completions", bodies: [2][]byte{
		[]byte(`{"model":"fake-small","messages":[{"role":"user","content":"` + question + `"}]}`),
		[]byte(`{"model":"fake-small","stream":true,"messages":[{"role":"user","content":"` + question + `"}]}`)},
		end: func(data []byte) (bool, bool) {
			return bytes.Equal(data, []byte("[DONE]")), bytes.HasPrefix(data, []byte(`{"error"`))
		}},
	{name: "responses", route: "/v1/responses", bodies: [2][]byte{
		[]byte(`{"model":"fake-small","input":"` + question + `"}`),
		[]byte(`{"model":"fake-small","stream":true,"input":"` + question + `"}`)},
		end: func(data []byte) (bool, bool) {
			// The stream's last event is response.completed; it fails with an error event
			// or ends with response.failed or response.incomplete.
			return has(data, `"response.completed"`),
				has(data, `"type":"error"`) || has(data, `"response.failed"`) || has(data, `"response.incomplete"`)
		}},
	{name: "messages", route: "/v1/messages", header: http.Header{"Anthropic-Version": {"2023-06-01"}}, bodies: [2][]byte{
		[]byte(`{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":"` + question + `"}]}`),
		[]byte(`{"model":"claude-haiku-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"` + question + `"}]}`)},
		end: func(data []byte) (bool, bool) {
			return has(data, `"type":"message_stop"`), has(data, `"type":"error"`)
		}},
	{name: "embeddings", route: "/v1/embeddings", bodies: [2][]byte{
		[]byte(`{"model":"text-embedding-3-small","input":"` + question + `"}`), nil}},
}

func has(data []byte, s string) bool { return bytes.Contains(data, []byte(s)) }

// parseAPIs returns the APIs a comma-separated list names, in its order.
func parseAPIs(list string) ([]*gatewayAPI, error) {
	var out []*gatewayAPI
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		var found *gatewayAPI
		for _, a := range gatewayAPIs {
			if a.name == name {
				found = a
			}
		}
		switch {
		case found == nil:
			return nil, fmt.Errorf("-apis %q: %q is none of chat, responses, messages, embeddings", list, name)
		case slices.Contains(out, found):
			return nil, fmt.Errorf("-apis %q names %s twice", list, name)
		}
		out = append(out, found)
	}
	return out, nil
}
