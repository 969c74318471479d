package ops

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxRefBytes bounds a reference a client gives (a request, chat or document reference).
const MaxRefBytes = 255

// ReasonInvalidField is the reason of every refusal of a malformed field or header.
const ReasonInvalidField = "invalid_field"

// CheckRef returns an EINVALID error naming field unless v is a reference Settle can store,
// search and show: at most max bytes of UTF-8 without control characters. It is the one
// check every client-given reference and header goes through (the API, the gateway, jobs
// and MCP), so a NUL, a cut multi-byte character or a 10 KB header is a 4xx, never a 5xx
// from the database.
func CheckRef(field, v string, max int) error {
	switch {
	case len(v) > max:
		return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf("%s is longer than %d bytes.", field, max)}
	case !utf8.ValidString(v):
		return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf("%s is not valid UTF-8.", field)}
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf("%s contains a control character.", field)}
		}
	}
	return nil
}

// Shows reports whether s shows as itself wherever people read it: valid UTF-8 of printable
// characters only (letters, marks, numbers, punctuation, symbols and the ASCII space). A
// name people tell each other apart by (a saved view's, an exception's assignee) must not
// hold an invisible character, a bidi override or a space that is not one, each of which
// lets it pass for another.
func Shows(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// CheckNote returns an EINVALID error naming field unless v is text a person wrote that
// Settle can store and show as written: valid UTF-8 whose only control characters are
// tabs and line breaks. Postgres refuses a NUL and bytes that are not UTF-8, which would
// fail the action as a server error; any other control character (an escape sequence
// pasted from a terminal) would reach whoever reads the audit log in a terminal.
func CheckNote(field, v string) error {
	if !utf8.ValidString(v) {
		return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf(
			"%s is not valid UTF-8; paste it as plain text.", field)}
	}
	for _, r := range v {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf(
				"%s contains a control character (%U); only line breaks and tabs may be in it.", field, r)}
		}
	}
	return nil
}

// CheckJSONText returns an EINVALID error naming field unless the raw JSON value b can be
// stored as it is: valid UTF-8, and no escaped NUL (\u0000) nor half of a UTF-16 surrogate
// pair escaped alone, which Postgres refuses in text and jsonb (jsontext.go). Free text
// (chat messages, documents) may hold any other character.
func CheckJSONText(field string, b []byte) error {
	if !utf8.Valid(b) {
		return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf("%s is not valid UTF-8.", field)}
	}
	switch start, _, nul := refusedEscape(b, 0); {
	case start < 0:
		return nil
	case nul:
		return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf("%s contains a NUL character.", field)}
	default:
		return &Error{Code: EINVALID, Reason: ReasonInvalidField, Message: fmt.Sprintf(
			"%s contains half of a UTF-16 surrogate pair (%s), which is no character; send the whole pair or the character itself.", field, b[start:start+6])}
	}
}

// CleanRef is v when it passes CheckRef, else "": what a refused request is recorded
// under, since the refusal itself must be recorded whatever the client sent (rule 8).
func CleanRef(v string) string {
	if CheckRef("ref", v, MaxRefBytes) != nil {
		return ""
	}
	return v
}

// TruncateUTF8 cuts s to at most n bytes without splitting a character.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
