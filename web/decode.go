package web

import (
	"bytes"
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
// large → 413, malformed → 400, a value of the wrong type (a fraction for cents), a key that
// is a field's name in another case or a key given twice → 422.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &ops.Error{Code: EUNSUPPORTED, Reason: "unsupported_media_type", Message: "Send the body as application/json."}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err == nil {
		err = checkTextFields(body)
		if ops.ErrorCode(err) == ops.EINVALID {
			return err
		}
	}
	if err == nil {
		if err := checkNames(body, v); err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil && dec.More() {
			return &ops.Error{Code: EMALFORMED, Reason: "malformed_json", Message: "The body holds more than one JSON value."}
		}
	}
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
	return nil
}

// checkNames refuses a body with a key that is not a field's exact name but would be read as
// one (AMOUNT_CENTS for amount_cents), or a key given twice in one object: encoding/json
// would read either differently from a gateway, a log or a person looking at the body.
func checkNames(body []byte, v any) error {
	p := ops.FindJSONNameProblem(body, v)
	switch {
	case p == nil:
		return nil
	case p.Repeated:
		return &ops.Error{Code: ops.EINVALID, Reason: ops.ReasonInvalidField, Message: fmt.Sprintf("%s is given more than once; give each field once.", ops.ShownKey(p.Path))}
	default:
		return &ops.Error{Code: ops.EINVALID, Reason: ops.ReasonInvalidField, Message: fmt.Sprintf("%q is not a field; did you mean %s? Field names are case-sensitive.", ops.ShownKey(p.Path), p.Field)}
	}
}

// checkTextFields refuses a body whose strings Settle could not store as they are: bytes
// that are not UTF-8 (which decoding would silently replace), an escaped NUL or half of a
// UTF-16 surrogate pair. The refusal names the field by its path (document.text). Most
// bodies pass the quick look and are not walked.
func checkTextFields(body []byte) error {
	if ops.CheckJSONText("The body", body) == nil {
		return nil
	}
	if err := walkText(body); err != nil {
		return err
	}
	return ops.CheckJSONText("The body", body)
}

// textLevel is an object or array open around the token walkText reads.
type textLevel struct {
	path    string // the container's own path
	object  bool
	key     string // an object's current key
	wantKey bool   // an object's next string is a key
}

// walkText checks each string value of body, named by its path, in one pass over its
// tokens: a body nested deep costs its length, not its length once per level. A body that
// is not JSON passes here, and decoding says what is wrong with it.
func walkText(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []textLevel
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		path := valuePath(stack)
		if s, ok := tok.(string); ok && len(stack) > 0 && stack[len(stack)-1].wantKey {
			stack[len(stack)-1].key, stack[len(stack)-1].wantKey = s, false
			continue
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, textLevel{path: path, object: tok == json.Delim('{'), wantKey: tok == json.Delim('{')})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if _, ok := tok.(string); ok && path != "" {
			// The token's bytes as sent: decoding would have replaced what is not UTF-8.
			if err := ops.CheckJSONText(path, body[start:dec.InputOffset()]); err != nil {
				return err
			}
		}
	}
}

// valuePath is the path of the value read next: an object's key below its own path, or
// the path of the array it is in.
func valuePath(stack []textLevel) string {
	if len(stack) == 0 {
		return ""
	}
	top := stack[len(stack)-1]
	switch {
	case !top.object:
		return top.path
	case top.path == "":
		return top.key
	default:
		return top.path + "." + top.key
	}
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
//
// The reference is checked as every client reference is (ops.CheckRef), and a refusal names
// where it came from.
func requestRef(r *http.Request, fromBody string) (string, error) {
	v, name := refSource(r, fromBody)
	return v, ops.CheckRef(name, v, ops.MaxRefBytes)
}

// refSource is the client's request reference and the field or header it came from.
func refSource(r *http.Request, fromBody string) (string, string) {
	for _, src := range []struct{ name, v string }{
		{"request_ref", fromBody}, {"X-Request-Ref", r.Header.Get("X-Request-Ref")}, {"X-Client-Request-Id", r.Header.Get("X-Client-Request-Id")},
	} {
		if src.v != "" {
			return src.v, src.name
		}
	}
	return "", "request_ref"
}
