package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/web"
)

// apiDoc loads the embedded OpenAPI document and checks it is a valid OpenAPI 3.1 document.
func apiDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(web.OpenAPIDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("the document is OpenAPI %s, not 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.IsOpenAPI31OrLater(), openapi3.EnableSchemaFormatValidation()); err != nil {
		t.Fatal(err)
	}
	return doc
}

// contract sends real requests to a real server and validates each request and its answer
// against the document with kin-openapi, recording which operations answered what.
type contract struct {
	router routers.Router
	mu     sync.Mutex
	// seen holds "METHOD /path/{param} status" of every validated answer.
	seen map[string]bool
}

func newContract(t *testing.T) *contract {
	t.Helper()
	// The SSE stream of the chat gateway is text, checked as a string.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	r, err := legacy.NewRouter(apiDoc(t))
	if err != nil {
		t.Fatal(err)
	}
	return &contract{router: r, seen: map[string]bool{}}
}

// apiCall is one request: hdr is pairs of header names and values. A request outside the
// document on purpose (a missing token, a malformed body) is sent with offDoc, and only its
// answer is validated.
type apiCall struct {
	method, url, body string
	hdr               []string
	offDoc            bool
}

func (c *contract) do(t *testing.T, k apiCall) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(k.method, k.url, strings.NewReader(k.body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(k.hdr); i += 2 {
		req.Header.Add(k.hdr[i], k.hdr[i+1])
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s is not in the document: %v", k.method, req.URL.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}}
	if !k.offDoc {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Fatalf("%s %s: the request does not match the document: %v", k.method, req.URL.Path, err)
		}
	}
	req.Body = io.NopCloser(strings.NewReader(k.body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: in.Options}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Fatalf("%s %s answered %d %s, which does not match the document: %v", k.method, req.URL.Path, resp.StatusCode, body, err)
	}
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %s %d", route.Method, route.Path, resp.StatusCode)] = true
	c.mu.Unlock()
	return resp, body
}

// want calls and checks the answer's status, and its problem code when code is not "".
func (c *contract) want(t *testing.T, k apiCall, status int, code string) map[string]any {
	t.Helper()
	resp, body := c.do(t, k)
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != status || (code != "" && out["code"] != code) {
		t.Fatalf("%s %s: got %d %s; want %d %s", k.method, k.url, resp.StatusCode, body, status, code)
	}
	return out
}

func TestOpenAPIListsEveryRouteAndCode(t *testing.T) {
	t.Parallel()
	doc := apiDoc(t)
	s, _ := newServer(t)
	served := map[string]bool{}
	err := chi.Walk(s.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(route, "/api/") && !strings.HasPrefix(route, "/v1/") {
			return nil
		}
		served[method+" "+route] = true
		if p := doc.Paths.Find(route); p == nil || p.GetOperation(method) == nil {
			t.Errorf("%s %s is served but not in the document", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// And the other way: the document promises no route that is not served.
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("%s %s is in the document but not served", method, path)
			}
		}
	}
	enum := doc.Components.Schemas["ProblemCode"].Value.Enum
	for _, code := range web.ProblemCodes() {
		if !slices.Contains(enum, any(code)) {
			t.Errorf("problem code %q is not in the document's ProblemCode enum", code)
		}
	}
}

func TestOpenAPIServedWithoutToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newContract(t)
	_, body := c.do(t, apiCall{method: http.MethodGet, url: e.url + "/api/openapi.json"})
	if !bytes.Equal(body, web.OpenAPIDoc) {
		t.Fatal("GET /api/openapi.json is not the embedded document")
	}
}
