package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// maxBody is the largest JSON body the API reads.
const maxBody = 1 << 20

// decodeJSON reads one JSON object from the request into v. Wrong content type → 415, too
// large → 413, malformed → 400, a value of the wrong type (a fraction for cents) → 422.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &ops.Error{Code: EUNSUPPORTED, Reason: "unsupported_media_type", Message: "Send the body as application/json."}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case err == nil:
	case errors.As(err, &tooBig):
		return &ops.Error{Code: ETOOLARGE, Reason: "body_too_large", Message: fmt.Sprintf("The body is over %d bytes.", maxBody)}
	case errors.As(err, &typeErr):
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_field", Message: fmt.Sprintf("%s must be a %s.", typeErr.Field, typeErr.Type)}
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &ops.Error{Code: EMALFORMED, Reason: "malformed_json", Message: "The body is not valid JSON."}
	default:
		return &ops.Error{Code: EMALFORMED, Reason: "malformed_json", Message: "The body could not be read: " + err.Error()}
	}
	if dec.More() {
		return &ops.Error{Code: EMALFORMED, Reason: "malformed_json", Message: "The body holds more than one JSON value."}
	}
	return nil
}

// HTTP-only error codes: the domain never produces them, the transport does.
const (
	EMALFORMED   = "malformed"
	EUNSUPPORTED = "unsupported_media_type"
	ETOOLARGE    = "too_large"
)

// idempotencyKey returns the Idempotency-Key header as llm.ParseKey, the one parser of it
// that every route uses, takes it: the value and whether the header was sent at all. Two
// header fields are joined by a newline, which ParseKey refuses.
func idempotencyKey(r *http.Request) (raw string, present bool) {
	vs := r.Header.Values("Idempotency-Key")
	return strings.Join(vs, "\n"), len(vs) > 0
}

// requestRef returns the client's own id for a request, recorded as its request_ref: the
// body's request_ref when the route has one, else the X-Request-Ref header. X-Client-Request-Id
// (the name OpenAI's clients use) is read too, since honouring it costs nothing.
// X-Request-Id is never read: it is Settle's own id of the request, made by Settle and sent
// back on every response (see requestID).
func requestRef(r *http.Request, fromBody string) string {
	return firstNonEmpty(fromBody, r.Header.Get("X-Request-Ref"), r.Header.Get("X-Client-Request-Id"))
}
