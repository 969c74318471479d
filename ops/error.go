package ops

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. They are stable: the API sends them to clients as the problem `code`.
const (
	ENOTFOUND     = "not_found"
	ECONFLICT     = "conflict"
	EINVALID      = "invalid"
	EFORBIDDEN    = "forbidden"
	EUNAUTHORIZED = "unauthorized"
	EINTERNAL     = "internal"
	// EUNAVAILABLE means a provider or dependency could not be asked; trying later may work.
	EUNAVAILABLE = "unavailable"
)

// Error is the one error type the domain returns on purpose. Message is safe to show to the
// person or program that caused it; anything else stays in the wrapped Err for the logs.
type Error struct {
	Code    string
	Message string
	// Reason, when set, is a more precise stable code for clients (amount_over_remainder).
	Reason string
	// Closed names who closed the operation when a close lost a race.
	Closed *Closure
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted, user-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any other
// error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorReason returns the precise stable code of err: its Reason if it has one, else its
// Code.
func ErrorReason(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	return ErrorCode(err)
}

// ErrorMessage returns the user-safe message of err; internal errors get a generic one so
// that no detail of the system leaks to clients.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != EINTERNAL {
		return e.Message
	}
	return "Internal error."
}

// Closure says who closed an operation, when and how.
type Closure struct {
	Status   Status
	ClosedBy string
	ClosedAt time.Time
}
