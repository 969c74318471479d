package mcptool

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestLineFilterPassesGoodLinesAndAnswersBadOnes: well-formed lines reach the transport
// byte for byte; each malformed one is answered with a JSON-RPC error (its id when it can
// be read) and never reaches it, so nothing is called for it.
func TestLineFilterPassesGoodLinesAndAnswersBadOnes(t *testing.T) {
	good := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n",
		`{"jsonrpc":"2.0","id":"a","method":"ping"}` + "\r\n",
		`[{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\n",
		"\n",
		`{"jsonrpc":"2.0","id":3,"method":"ping"}` + " \t\n",     // the SDK would take the blanks for trailing data
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`, // last line, no newline
	}
	bad := []struct{ line, reply string }{
		{"not json\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"`},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}` + "\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"`},
		{`{"jsonrpc":"1.0","id":"k","method":"ping"}` + "\n", `{"jsonrpc":"2.0","id":"k","error":{"code":-32600,`},
		{`{"jsonrpc":"2.0","id":7,"result":{}, "x":` + "\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{"[]\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`"a string"` + "\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`{"id":` + strings.Repeat("9", MaxLineLength) + "}\n", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
	}
	var in strings.Builder
	for i, g := range good[:len(good)-1] {
		in.WriteString(bad[i%len(bad)].line)
		in.WriteString(g)
	}
	for _, b := range bad[len(good)-1:] {
		in.WriteString(b.line)
	}
	in.WriteString(good[len(good)-1])
	var replies bytes.Buffer
	got, err := io.ReadAll(NewLineFilter(strings.NewReader(in.String()), NewSyncWriter(&replies), nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(good, ""); string(got) != strings.Replace(want, " \t\n", "\n", 1) {
		t.Errorf("passed on %q, want %q", got, want)
	}
	lines := strings.Split(strings.TrimSuffix(replies.String(), "\n"), "\n")
	if len(lines) != len(bad) {
		t.Fatalf("%d replies, want %d: %q", len(lines), len(bad), replies.String())
	}
	for i, b := range bad {
		if !strings.HasPrefix(lines[i], b.reply) {
			t.Errorf("reply %d %q, want it to start %q", i, lines[i], b.reply)
		}
	}
	for i, l := range lines {
		if len(l) > 400 {
			t.Errorf("reply %d is %d bytes: it echoes the line", i, len(l))
		}
	}
}
