package sso

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// FlowKeySize is the length of a FlowSealer's key: AES-256.
const FlowKeySize = 32

// flowAD binds a sealed value to this use, so a value sealed with the same key for
// something else never opens as a flow.
var flowAD = []byte("settle sso flow 1")

// FlowSealer keeps a sign-in in progress in the person's browser rather than on the server,
// so that a visitor who never comes back from the provider costs Settle nothing to store:
// the flow is encrypted and authenticated (AES-256-GCM), so the browser can neither read
// the PKCE verifier nor change a field, and a value it did not get from Settle opens as no
// flow at all.
type FlowSealer struct {
	aead cipher.AEAD
}

// NewFlowSealer seals with key, FlowKeySize bytes that every server of a deployment shares,
// so that a sign-in started on one may finish on another.
func NewFlowSealer(key []byte) (*FlowSealer, error) {
	if len(key) != FlowKeySize {
		return nil, fmt.Errorf("a sign-in flow key has %d bytes, not %d", len(key), FlowKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &FlowSealer{aead: aead}, nil
}

// NewLocalFlowSealer seals with a random key of this process only: a sign-in must then
// finish on the server that started it.
func NewLocalFlowSealer() *FlowSealer {
	key := make([]byte, FlowKeySize)
	_, _ = rand.Read(key)
	s, _ := NewFlowSealer(key) // a key of the right size cannot fail
	return s
}

// Seal is f sealed, as a cookie's value (unpadded base64url).
func (s *FlowSealer) Seal(f Flow) string {
	b, _ := json.Marshal(f) // a Flow is strings and a time: it always marshals
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, b, flowAD))
}

// Open is the flow v seals, or the zero Flow, which Finish refuses as no sign-in in
// progress, when v was not sealed by a FlowSealer with this key.
func (s *FlowSealer) Open(v string) Flow {
	b, err := base64.RawURLEncoding.DecodeString(v)
	n := s.aead.NonceSize()
	if err != nil || len(b) < n {
		return Flow{}
	}
	plain, err := s.aead.Open(nil, b[:n], b[n:], flowAD)
	if err != nil {
		return Flow{}
	}
	var f Flow
	if json.Unmarshal(plain, &f) != nil {
		return Flow{}
	}
	return f
}
