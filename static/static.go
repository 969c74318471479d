// Package static holds the dashboard's stylesheet and other assets, embedded into the
// binary so the one settle executable serves everything it needs.
package static

import "embed"

// FS holds the assets, served under /static/.
//
//go:embed *.css
var FS embed.FS
