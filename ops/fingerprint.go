package ops

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Fingerprint returns the SHA-256 of the canonical JSON of fields: keys sorted at every
// level, no insignificant whitespace. Callers pass every field that changes the result or
// the price and none of the transport fields.
func Fingerprint(fields map[string]any) string {
	// encoding/json sorts map keys, so equal maps give equal bytes.
	b, err := json.Marshal(fields)
	if err != nil {
		panic("fingerprint of unencodable fields: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
