package fake

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Embeddings (POST /v1/embeddings): one deterministic unit vector per input, derived from
// the model and the input alone, so the same text always embeds the same way. A shorter
// vector (dimensions) is the start of the full one, scaled back to unit length, as OpenAI's
// text-embedding-3 models shorten theirs. Every request that reaches generation is billed.

// embeddingsRequest is the part of an embeddings request the fake reads.
type embeddingsRequest struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// embedInput is one input to embed: its canonical form (the seed of its vector) and its
// token count.
type embedInput struct {
	canonical string
	tokens    int
}

// maxEmbedInputs is how many inputs one request may carry, as at OpenAI.
const maxEmbedInputs = 2048

// embeddings answers POST /v1/embeddings.
func (l *LLM) embeddings(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := newID("req_")
	w.Header().Set("x-request-id", reqID)
	outcome := "generated"
	var fault *LLMFault
	defer func() { l.logCall(APIEmbeddings, reqID, start, outcome, fault) }()
	key, ok := bearer(r)
	if !ok {
		outcome = "unauthorized"
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key. Send it as 'Authorization: Bearer ...'.")
		return
	}
	req, inputs, dims, msg := readEmbeddingsRequest(r)
	if msg != "" {
		outcome = "invalid"
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", msg)
		return
	}
	fault = l.pickFault(r.URL.Path)
	if !l.sleep(r.Context(), time.Duration(l.latency.Load())) {
		outcome = "gone"
		return
	}
	if fault != nil {
		if o := l.failBeforeGenerating(w, r, fault); o != "" {
			outcome = o
			return
		}
	}

	// Generation: from here on the request is billed.
	tokens := 0
	data := make([]obj, len(inputs))
	for i, in := range inputs {
		tokens += in.tokens
		v := embedVector(req.Model, in.canonical, dims)
		data[i] = obj{"object": "embedding", "index": i, "embedding": encodeVector(v, req.EncodingFormat)}
	}
	g := Generation{ID: reqID, API: APIEmbeddings, RequestID: reqID, APIKeyID: LLMKeyID(key),
		ClientRequestID: r.Header.Get("X-Client-Request-Id"), Model: req.Model, PromptTokens: tokens, Created: l.clock()}
	if fault != nil {
		g.Fault = string(fault.Kind)
	}
	l.mu.Lock()
	l.generations = append(l.generations, g)
	l.mu.Unlock()
	if !holdBilled(l.sleep, w, r, fault, &outcome) {
		return
	}
	if fault != nil && fault.Kind == LLMFaultDropStream {
		outcome = "fault"
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusOK, obj{"object": "list", "data": data, "model": req.Model,
		"usage": obj{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// readEmbeddingsRequest reads and checks an embeddings request; msg says why it is refused.
func readEmbeddingsRequest(r *http.Request) (req embeddingsRequest, inputs []embedInput, dims int, msg string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil || json.Unmarshal(body, &req) != nil {
		return req, nil, 0, "We could not parse the JSON body of your request."
	}
	if req.Model == "" {
		return req, nil, 0, "you must provide a model parameter"
	}
	inputs, ok := embedInputs(req.Input)
	if !ok {
		return req, nil, 0, "'$.input' is invalid: give a non-empty string, array of strings, array of tokens or array of token arrays, at most 2048 inputs."
	}
	dims = 1536
	if strings.Contains(req.Model, "large") {
		dims = 3072
	}
	if req.Dimensions != nil {
		switch {
		case strings.Contains(req.Model, "ada-002"):
			return req, nil, 0, "This model does not support specifying dimensions."
		case *req.Dimensions < 1 || *req.Dimensions > dims:
			return req, nil, 0, fmt.Sprintf("Invalid 'dimensions': expected a value from 1 to %d.", dims)
		}
		dims = *req.Dimensions
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		return req, nil, 0, "Invalid 'encoding_format': expected 'float' or 'base64'."
	}
	return req, inputs, dims, ""
}

// embedInputs reads input in any of its four forms: a string, an array of strings, an array
// of token ids, or an array of token id arrays. Empty inputs are refused.
func embedInputs(raw json.RawMessage) ([]embedInput, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []embedInput{{canonical: "s:" + s, tokens: max(len(strings.Fields(s)), 1)}}, s != ""
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		out := make([]embedInput, len(strs))
		for i, s := range strs {
			if s == "" {
				return nil, false
			}
			out[i] = embedInput{canonical: "s:" + s, tokens: max(len(strings.Fields(s)), 1)}
		}
		return out, len(out) > 0 && len(out) <= maxEmbedInputs
	}
	var toks []int
	if json.Unmarshal(raw, &toks) == nil {
		return []embedInput{{canonical: fmt.Sprint("t:", toks), tokens: len(toks)}}, len(toks) > 0
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) != nil || len(lists) == 0 || len(lists) > maxEmbedInputs {
		return nil, false
	}
	out := make([]embedInput, len(lists))
	for i, t := range lists {
		if len(t) == 0 {
			return nil, false
		}
		out[i] = embedInput{canonical: fmt.Sprint("t:", t), tokens: len(t)}
	}
	return out, true
}

// embedVector is the unit vector of dims components for one input of model: the start of
// the model's full vector, scaled back to unit length.
func embedVector(model, canonical string, dims int) []float32 {
	sum := sha256.Sum256([]byte(model + "\x00" + canonical))
	seed := binary.BigEndian.Uint64(sum[:8])
	rng := rand.New(rand.NewPCG(seed, seed^0xe3b))
	v := make([]float64, dims)
	norm := 0.0
	for i := range v {
		v[i] = rng.NormFloat64()
		norm += v[i] * v[i]
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dims)
	for i := range v {
		out[i] = float32(v[i] / norm)
	}
	return out
}

// encodeVector writes v as a list of numbers, or for base64 as the base64 of its float32
// values in little-endian order, as OpenAI does.
func encodeVector(v []float32, format string) any {
	if format == "base64" {
		b := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}
