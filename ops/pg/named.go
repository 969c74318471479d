package pg

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// namedQuery is a statement written with @names, rewritten once into its $n form.
type namedQuery struct {
	sql   string
	names []string // the name of each $n, in order
}

// argName stands in for an argument's value while a statement is rewritten, so the
// rewritten argument list tells which name each $n is.
type argName string

// namedQueries caches the rewrites by statement text. pgx's NamedArgs parses the whole
// text on every call; for the ledger's long statements that was a fifth of a gateway
// call's allocations and some 30 µs of each write.
var namedQueries sync.Map // string → *namedQuery

// positional returns sql in its $n form and args in the matching order.
func positional(sql string, args pgx.NamedArgs) (string, []any, error) {
	if c, ok := namedQueries.Load(sql); ok {
		q := c.(*namedQuery)
		out := make([]any, len(q.names))
		for i, n := range q.names {
			out[i] = args[n]
		}
		return q.sql, out, nil
	}
	markers := make(pgx.NamedArgs, len(args))
	for k := range args {
		markers[k] = argName(k)
	}
	rewritten, order, err := markers.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		return "", nil, err
	}
	q := &namedQuery{sql: rewritten, names: make([]string, len(order))}
	for i, v := range order {
		n, ok := v.(argName)
		if !ok {
			// A name the caller did not pass: not cached, so a later call that passes it
			// is rewritten afresh rather than sent a NULL.
			_, out, err := args.RewriteQuery(context.Background(), nil, sql, nil)
			return rewritten, out, err
		}
		q.names[i] = string(n)
	}
	namedQueries.Store(sql, q)
	return positional(sql, args)
}
