package fake

import (
	"net/http"
	"strings"
)

// LLMAPI names one of the fake OpenAI's generating routes. A gateway's test counts the
// generations of the API it calls, since "one upstream generation" is its promise.
type LLMAPI string

// The generating APIs of the fake OpenAI.
const (
	// APIChatCompletions is POST /v1/chat/completions.
	APIChatCompletions LLMAPI = "chat.completions"
	// APIResponses is POST /v1/responses.
	APIResponses LLMAPI = "responses"
	// APIEmbeddings is POST /v1/embeddings.
	APIEmbeddings LLMAPI = "embeddings"
)

// GenerationsOf returns the billed generations of one API, in the order they were billed.
func (l *LLM) GenerationsOf(api LLMAPI) []Generation {
	var out []Generation
	for _, g := range l.Generations() {
		if g.API == api {
			out = append(out, g)
		}
	}
	return out
}

// adminGenerations answers GET /_fake/llm/generations: the whole ledger, or with ?api=
// one API's share of it.
func (l *LLM) adminGenerations(w http.ResponseWriter, r *http.Request) {
	api := r.URL.Query().Get("api")
	if api == "" {
		writeJSON(w, http.StatusOK, l.Generations())
		return
	}
	gens := l.GenerationsOf(LLMAPI(api))
	if gens == nil {
		gens = []Generation{}
	}
	writeJSON(w, http.StatusOK, gens)
}

// usageGenerations is the ledger a usage report at path covers: embeddings at the
// embeddings report, everything else at the completions report, as OpenAI counts Responses
// API calls among completions.
func (l *LLM) usageGenerations(path string) []Generation {
	embeddings := strings.HasSuffix(path, "/embeddings")
	var out []Generation
	for _, g := range l.Generations() {
		if (g.API == APIEmbeddings) == embeddings {
			out = append(out, g)
		}
	}
	return out
}

func usageResultObject(path string) string {
	if strings.HasSuffix(path, "/embeddings") {
		return "organization.usage.embeddings.result"
	}
	return "organization.usage.completions.result"
}
