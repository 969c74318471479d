package mcptool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/settle-dev/settle/ops"
)

// The arguments each tool takes, spelled exactly as in its input schema.
var (
	refundArgNames = []string{"order_id", "amount_cents", "currency", "payment_intent", "reason"}
	statusArgNames = []string{"operation_id", "order_id", "amount_cents", "currency"}
)

// decodeArgs reads a tool's arguments strictly: an argument the tool does not take is
// refused by name, so a model that misspells one learns which.
func decodeArgs(raw json.RawMessage, v any, names []string) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	allowed := strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	if err := checkNames(raw, v, names, allowed); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data")
		}
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field == "amount_cents":
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_amount", Message: "amount_cents must be a whole number of the currency's smallest unit, e.g. 3800 for $38.00."}
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return &ops.Error{Code: ops.EINVALID, Reason: "invalid_field", Message: fmt.Sprintf("%s must be a %s.", typeErr.Field, typeErr.Type.Kind())}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &ops.Error{Code: ops.EINVALID, Reason: "unknown_field", Message: fmt.Sprintf("Unknown argument %s; this tool takes %s.", strings.TrimPrefix(err.Error(), "json: unknown field "), allowed)}
	default:
		return &ops.Error{Code: ops.EINVALID, Reason: "malformed_arguments", Message: "The arguments must be one JSON object; this tool takes " + allowed + "."}
	}
}

// checkNames refuses an argument whose name is not one of names exactly, and one given
// twice. encoding/json would match a name in any case and let the later of two win, so a
// call showing amount_cents 100 to the person who approves it could refund its AMOUNT_CENTS
// 3800 instead. Which keys it would so misread is ops.FindJSONNameProblem's to say, as for
// the API's bodies; a name no argument has is refused here too, cut to what a refusal
// repeats (ops.ShownKey). What is not an object is left for Decode to refuse.
func checkNames(raw []byte, v any, names []string, allowed string) error {
	if p := ops.FindJSONNameProblem(raw, v); p != nil && p.Repeated {
		return &ops.Error{Code: ops.EINVALID, Reason: "duplicate_field", Message: fmt.Sprintf("Argument %s is given more than once; give each argument once.", ops.ShownKey(p.Path))}
	} else if p != nil {
		return unknownArg(p.Path, allowed)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil
		}
		if !slices.Contains(names, name) {
			return unknownArg(name, allowed)
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
	}
	return nil
}

// unknownArg refuses an argument the tool does not take, by name.
func unknownArg(name, allowed string) error {
	return &ops.Error{Code: ops.EINVALID, Reason: "unknown_field", Message: fmt.Sprintf("Unknown argument %q; this tool takes %s (names are case-sensitive).", ops.ShownKey(name), allowed)}
}
