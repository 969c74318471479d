// Package static holds the dashboard's stylesheet, script and vendored htmx, embedded into
// the binary so the one settle executable serves everything it needs.
package static

import (
	"embed"
	"io/fs"
	"path"
)

// files embeds the whole folder: vendor/ exists only after `make deps` (npm ci), and a
// pattern naming it would stop the build on a fresh clone. Pages work without it.
//
//go:embed *
var files embed.FS

// FS holds the assets, served under /static/. Only stylesheets, scripts and their source
// maps are visible; the Go source beside them is not an asset.
var FS fs.FS = assets{files}

// HasHTMX reports whether the vendored htmx was embedded at build time.
func HasHTMX() bool {
	_, err := fs.Stat(files, "vendor/htmx.min.js")
	return err == nil
}

type assets struct{ fs fs.FS }

func (a assets) Open(name string) (fs.File, error) {
	f, err := a.fs.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		// Directory listings would show what is embedded; nobody needs them.
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	switch path.Ext(name) {
	case ".css", ".js", ".map":
		return f, nil
	}
	f.Close()
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}
