package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settle-dev/settle/ops"
)

// intentRaced reports whether an insert lost the race for its intent's next operation
// number: another request's operation of the intent, committed after this statement's
// snapshot, took it (see migration 00026).
func intentRaced(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "operations_intent_seq_idx"
}

// interpret maps a database error to the domain's: a database that could not be reached is
// ops.DatabaseUnreachable, a unique or rule violation is the caller's conflict or mistake, a
// cancelled context stays itself, anything else is internal.
func interpret(err error, what string) error {
	if err == nil {
		return nil
	}
	if unreachable(err) {
		return ops.DatabaseUnreachable(fmt.Errorf("%s: %w", what, err))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return &ops.Error{Code: ops.ECONFLICT, Message: "That already exists.", Err: fmt.Errorf("%s: %w", what, err)}
		case "23503", "23514", "22P02", "22001":
			return &ops.Error{Code: ops.EINVALID, Message: "The request breaks a rule of the ledger.", Err: fmt.Errorf("%s: %w", what, err)}
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return &ops.Error{Code: ops.EINTERNAL, Message: "Internal error.", Err: fmt.Errorf("%s: %w", what, err)}
}

// unreachable reports whether err says the database could not be reached or went away:
// a connection that could not be made (refused, reset, timed out, the server starting up or
// shutting down), one that broke under a statement, or a session the server ended (an
// administrator's or a crash's shutdown). A statement cut off so may or may not have run.
// A caller's own cancellation is not an outage.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exceptions; 57P01-57P03 are the server's shutdown
		// (administrator's or crash's) and its refusal to take connections while starting.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	if errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	// A network error other than a timeout: a statement's own deadline stays a timeout.
	var netErr net.Error
	return errors.As(err, &netErr) && !netErr.Timeout()
}

// translate is interpret for the statements whose other errors are theirs to word: a
// database that could not be reached is ops.DatabaseUnreachable, anything else is returned
// as it is, wrapped with what.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	if unreachable(err) {
		return ops.DatabaseUnreachable(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}
