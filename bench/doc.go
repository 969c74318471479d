// Package bench holds Settle's benchmark suite. It is a module of its own so that the peers
// it is measured against, DBOS Transact (the same job: a durable workflow per intent) and
// River (a queue, kept for reference), stay out of the product's go.mod.
//
// Everything is in the _test.go files; run it from the repository root with `make bench`
// (the exact command is at the top of docs/benchmarks/journal.md). One private, durable Postgres cluster
// is started for the whole run under .settle/bench-* and removed at the end.
package bench
