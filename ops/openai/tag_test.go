package openai

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"github.com/settle-dev/settle/ops/llm"
)

// A body that names no metadata and no store is tagged without its fields being read: the
// provider reads the same fields as from the body tagged by reading them (tagBody), and the
// tagging allocates once (224 bytes for a short chat completion), where decoding the body and
// encoding it again took 48 allocations and 2,632 bytes a send.
func TestABodyWithoutMetadataIsTaggedWithoutReadingIt(t *testing.T) {
	o := &Client{cfg: Config{Store: StoreOn}}
	for _, body := range []string{
		`{"model":"fake-small","messages":[{"role":"user","content":"summarise the ticket <b> & co"}],"temperature":0.2,"stream":true}`,
		" {\n \"model\": \"m\",\n \"messages\": [] } \n",
		`{}`,
	} {
		c := llm.Call{Body: []byte(body), OperationID: "op-1", TenantID: 7}
		plain, tagged := o.bodies(context.Background(), c)
		if string(plain) != body {
			t.Errorf("%s: plain body %s, want it as it came", body, plain)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &fields); err != nil {
			t.Fatal(err)
		}
		want, ok := tagBody(fields, "op-1", 7)
		if !ok || !sameJSON(t, tagged, want) {
			t.Errorf("%s: tagged %s, want the fields of %s", body, tagged, want)
		}
	}
	c := llm.Call{Body: []byte(`{"model":"fake-small","messages":[{"role":"user","content":"summarise the ticket"}],"temperature":0.2,"stream":true}`),
		OperationID: "op-1", TenantID: 7}
	if n := testing.AllocsPerRun(100, func() { _, _ = o.bodies(context.Background(), c) }); n > 2 {
		t.Errorf("tagging a body without metadata took %.0f allocations, want at most 2: its fields were read", n)
	}
}

// A body whose keys could name metadata or store, in any case or through a \u escape, or
// that is no JSON object, takes the path that reads its fields, as before: Settle's keys a
// client forged are dropped, store: false is honoured, and nothing else is tagged.
func TestABodyThatMayNameMetadataOrStoreIsRead(t *testing.T) {
	o := &Client{cfg: Config{Store: StoreOn}}
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","Metadata":{"settle_operation_id":"forged"}}`, ""},
		{`{"model":"m","metad\u0061ta":{"settle_operation_id":"forged"}}`, ""},
		{`{"model":"m","store":false}`, "untagged"},
		{`{"model":"m","STORE":false,"messages":[]}`, ""},
		{`{"model":"m","messages":[{"role":"user","content":"restore my order"}]}`, ""},
		{`[1,2]`, "untagged"},
		{`{"model":`, "untagged"},
	} {
		plain, tagged := o.bodies(context.Background(), llm.Call{Body: []byte(c.body), OperationID: "op-1", TenantID: 7})
		wantPlain, fields := untagged([]byte(c.body))
		want, ok := tagBody(fields, "op-1", 7)
		if !reflect.DeepEqual(plain, wantPlain) || (c.want == "untagged") != !ok || (ok && !reflect.DeepEqual(tagged, want)) || (!ok && tagged != nil) {
			t.Errorf("%s: sent %s / %s, want %s / %s", c.body, plain, tagged, wantPlain, want)
		}
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y map[string]any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return maps.EqualFunc(x, y, func(p, q any) bool { return reflect.DeepEqual(p, q) })
}

// The metadata appendTags writes by hand is what json.Marshal writes of the map tagBody
// builds, byte for byte.
func TestTheHandWrittenMetadataIsJSONMarshals(t *testing.T) {
	tagged, ok := appendTags([]byte(`{"model":"m"}`), "op_2Xy-9.z", 42)
	var fields map[string]json.RawMessage
	if !ok || json.Unmarshal(tagged, &fields) != nil {
		t.Fatalf("tagged %s, %v", tagged, ok)
	}
	want, _ := json.Marshal(map[string]string{llm.MetaOperation: "op_2Xy-9.z", llm.MetaTenant: "42"})
	if string(fields["metadata"]) != string(want) || string(fields["store"]) != "true" {
		t.Fatalf("metadata %s, store %s; want %s, true", fields["metadata"], fields["store"], want)
	}
	if _, ok := appendTags([]byte(`{"model":"m"}`), `op"1`, 42); ok {
		t.Fatal("an id that needs escaping was written by hand")
	}
}
