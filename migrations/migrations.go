// Package migrations holds the SQL schema, embedded into the binary and applied with goose.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
