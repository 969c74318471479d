package llm

import (
	"context"

	"github.com/settle-dev/settle/ops"
)

// api is one route the gateway serves, of OpenAI's APIs or Anthropic's. Everything the
// exactly-once protocol does (the Idempotency-Key rules, the operation committed before the
// send, the attempt loop, waiting on a key in flight, the replay of a stored result) is the
// gateway's and the same for every route; an api says only what is particular to its route:
// what its requests are, where the provider serves it, and what its answers and streams look
// like.
//
// Adding a route is one file with its api and one line in apis (and, for a provider of its
// own, its upstream in Config.Upstreams).
type api interface {
	// route is the client's path, such as /v1/chat/completions: how a Request names its
	// API, the route a policy may be set for, and what the operation stores.
	route() string
	// path is the provider's path under its base URL, such as /chat/completions.
	path() string
	// noun names one answer for messages, such as "chat completion".
	noun() string
	// differs says what a request reusing a key with another body changed.
	differs() string
	// check validates what parseRequest does not (the model, the text of every field and
	// the user are checked for every API) and sets req's Stream and IncludeUsage.
	check(req *request) error
	// excluded reports whether a top-level field stays out of the fingerprint: it changes
	// how the answer travels or what is logged, never the answer or its price.
	excluded(name string) bool
	// upstreamBody is the body sent to the provider for a client's body.
	upstreamBody(req *request, original []byte) []byte
	// assembler returns what rebuilds a streamed answer from its events.
	assembler() streamAssembler
	// parseAnswer reads a non-streaming answer of the provider.
	parseAnswer(body []byte) (answer, error)
	// replay turns a stored result back into the data of its stream's events.
	replay(stored []byte, req *request) ([][]byte, error)
	// usageOnly reports whether a stream event only carries usage, which only clients that
	// asked for usage receive (the gateway always asks the provider for it).
	usageOnly(data []byte) bool
	// appendFrame appends one event's data to b as a server-sent event.
	appendFrame(b, data []byte) []byte
	// done ends a stream that ended well; nil when the API sends no closing event.
	done() []byte
	// streamError is the event that ends a stream that began and then failed.
	streamError(err error) []byte
	// capRule is how its requests name their output cap, which a tenant's budget bounds
	// (budget_fit.go).
	capRule() capRule
	// words is what the pages, the desk and the gateway's answers say about its calls: what
	// the provider's record of one is, and what a lookup can do (words.go).
	words() callWords
}

// apis are the routes the gateway serves, by Request.Route.
var apis = [...]api{chatAPI{}, embeddingsAPI{}, responsesAPI{}, messagesAPI{}}

// apiFor returns the api of a route; "" is chat completions.
func apiFor(route string) (api, error) {
	if route == "" {
		return chatAPI{}, nil
	}
	for _, a := range apis {
		if a.route() == route {
			return a, nil
		}
	}
	return nil, ops.Errorf(ops.ENOTFOUND, "The LLM gateway does not serve %s.", route)
}

// answer is one whole answer of the provider, as the gateway stores and prices it.
type answer struct {
	// body is the answer as it is stored and replayed.
	body []byte
	// id is the provider's id of what it generated (its record id).
	id    string
	model string
	usage Usage
}

// streamAssembler rebuilds an answer from the events of a stream, as they arrive.
type streamAssembler interface {
	// add takes one event's data. It reports whether the event carried output (a token, a
	// tool call piece), which is what first_token means, and whether it only carries usage
	// (api.usageOnly), so the event is decoded once.
	add(data []byte) (token, usageOnly bool, err error)
	// whole reports whether the events so far make a whole answer, for a stream that ends
	// without a closing event.
	whole() bool
	// answer returns what the stream assembled to, in the non-streaming shape.
	answer() (answer, error)
	// id is the provider's id of the answer once an event has named it, for an API whose
	// answers are looked up by that id (the gateway records it on the attempt at once);
	// "" otherwise.
	id() string
}

// AttemptRefs records the provider's id of what an attempt generated, as soon as a stream
// names it, before the attempt ends: an attempt whose stream then breaks can still be looked
// up (or, at a provider without lookups, found by a person) by that id. ops/pg implements
// it.
type AttemptRefs interface {
	// RecordAttemptRef records ref on the attempt once: a ref already set is kept. durable
	// says a lookup reads it, so the commit waits for the disk; an id that only helps a
	// person (a provider whose answers nothing keeps to look up) is recorded without that
	// wait, and only a crash of the database itself can lose it, never the gateway's.
	RecordAttemptRef(ctx context.Context, opID string, attempt int, ref string, durable bool) error
}
