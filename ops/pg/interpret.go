package pg

import (
	"context"
	"errors"
	"fmt"

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

// interpret maps a database error to the domain's: a unique or rule violation is the
// caller's conflict or mistake, a cancelled context stays itself, anything else is internal.
func interpret(err error, what string) error {
	if err == nil {
		return nil
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
