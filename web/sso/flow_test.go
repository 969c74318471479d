package sso_test

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"

	"github.com/settle-dev/settle/web/sso"
)

// TestFlowSealerOpensOnlyItsOwn: a sealed flow opens with the key that sealed it, on any
// sealer holding that key; a value sealed with another key, changed by one bit, cut short
// or made up opens as no flow at all.
func TestFlowSealerOpensOnlyItsOwn(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, sso.FlowKeySize)
	a, err := sso.NewFlowSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sso.NewFlowSealer(key)
	f := sso.Flow{State: "st", Verifier: "ver", Nonce: "no", Next: "/ops?tab=expired", Expires: time.Date(2026, 3, 1, 9, 10, 0, 0, time.UTC)}
	v := a.Seal(f)
	if got := b.Open(v); got != f {
		t.Fatalf("opened %+v, want %+v", got, f)
	}
	if a.Seal(f) == v {
		t.Fatal("two seals of one flow are equal: the nonce is not fresh")
	}
	raw, _ := base64.RawURLEncoding.DecodeString(v)
	flipped := bytes.Clone(raw)
	flipped[len(flipped)/2] ^= 1
	for name, bad := range map[string]string{
		"another key": sso.NewLocalFlowSealer().Seal(f),
		"one bit":     base64.RawURLEncoding.EncodeToString(flipped),
		"cut short":   base64.RawURLEncoding.EncodeToString(raw[:10]),
		"made up":     "eyJzdGF0ZSI6InN0In0",
		"empty":       "",
	} {
		if got := a.Open(bad); got != (sso.Flow{}) {
			t.Errorf("%s opened as %+v", name, got)
		}
	}
	if _, err := sso.NewFlowSealer(key[:16]); err == nil {
		t.Error("a 16-byte key was taken")
	}
}
