package ops_test

import (
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
)

func TestCheckRefAndText(t *testing.T) {
	for _, bad := range []string{"a\x00b", "caf\xc3", "\xff", "\x1b[0m", "tab\there", "del\x7f", "c1\u0085", strings.Repeat("x", 256)} {
		if err := ops.CheckRef("request_ref", bad, 255); ops.ErrorReason(err) != ops.ReasonInvalidField || !strings.Contains(ops.ErrorMessage(err), "request_ref") {
			t.Errorf("%q: %v", bad, err)
		}
		if ops.CleanRef(bad) != "" {
			t.Errorf("CleanRef(%q) kept it", bad)
		}
	}
	for _, good := range []string{"", "toolu_01", "заказ 4417", "🙂", strings.Repeat("x", 255)} {
		if err := ops.CheckRef("request_ref", good, 255); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for raw, ok := range map[string]bool{`"a\u0000b"`: false, `"a\\u0000b"`: true, `"a\\\u0000"`: false, `"tab\tnew\nline"`: true, "\"caf\xc3\"": false} {
		if err := ops.CheckJSONText("messages", []byte(raw)); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
	if got := ops.TruncateUTF8("caféé", 4); got != "caf" {
		t.Errorf("TruncateUTF8 = %q", got)
	}
}
