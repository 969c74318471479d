package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveFake runs a fake's command on a free loopback port until the test ends, and returns
// its address once it answers GET path.
func serveFake(t *testing.T, args []string, path string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append(args, "--addr", addr, "--latency", "0s"), envList(nil), strings.NewReader(""), io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
	})
	for i := 0; i < 100; i++ {
		if resp, err := http.Get("http://" + addr + path); err == nil {
			resp.Body.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%v did not answer on %s", args, addr)
	return ""
}

func post(t *testing.T, url, body string, header map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestFakeAnthropicCommandServesAndRefusesBadFaults(t *testing.T) {
	t.Parallel()
	code, _, stderr := run(t, []string{"fake", "anthropic", "--faults", "explode"}, nil, "")
	if code != 2 || !strings.Contains(stderr, "settle: fake anthropic: --faults") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("bad faults: exit %d, stderr %q", code, stderr)
	}
	addr := serveFake(t, []string{"fake", "anthropic", "--faults", "overloaded calls=1"}, "/_fake/anthropic/generations")
	h := map[string]string{"x-api-key": "sk-ant-api03-x", "anthropic-version": "2023-06-01"}
	msg := `{"model":"claude-fake-4","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	for _, want := range []int{529, http.StatusOK} {
		if got := post(t, "http://"+addr+"/v1/messages", msg, h); got != want {
			t.Fatalf("message: %d, want %d", got, want)
		}
	}
}

func TestFakeLLMCommandServesResponsesAndEmbeddings(t *testing.T) {
	t.Parallel()
	addr := serveFake(t, []string{"fake", "llm", "--chunk-delay", "0s"}, "/_fake/llm/generations")
	h := map[string]string{"Authorization": "Bearer sk-x"}
	for path, body := range map[string]string{
		"/v1/responses":  `{"model":"fake-small","input":"hi"}`,
		"/v1/embeddings": `{"model":"text-embedding-3-small","input":"hi"}`,
	} {
		if got := post(t, "http://"+addr+path, body, h); got != http.StatusOK {
			t.Fatalf("%s: %d", path, got)
		}
	}
}
