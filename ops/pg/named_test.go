package pg

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPositionalMatchesPgx(t *testing.T) {
	const q = `SELECT @b::int, @a::text, '@not_a_name', @b::int -- @neither
WHERE x = @c`
	for i, args := range []pgx.NamedArgs{
		{"a": "x", "b": 1, "c": nil, "unused": true},
		{"a": "y", "b": 2, "c": 3, "unused": false}, // from the cache
	} {
		wantSQL, wantArgs, err := args.RewriteQuery(t.Context(), nil, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		gotSQL, gotArgs, err := positional(q, args)
		if err != nil {
			t.Fatal(err)
		}
		if gotSQL != wantSQL || !slices.Equal(gotArgs, wantArgs) {
			t.Fatalf("call %d: positional gave %q %v, pgx gives %q %v", i, gotSQL, gotArgs, wantSQL, wantArgs)
		}
	}
	if _, ok := namedQueries.Load(q); !ok {
		t.Fatal("the rewrite was not cached")
	}
}

func TestPositionalMissingNameIsNotCached(t *testing.T) {
	const q = `SELECT @present::int, @absent::int`
	// The process's cache outlives a run: the rewrite with both names, cached at the end of
	// this test, is there when it runs again (go test -count).
	namedQueries.Delete(q)
	_, args, err := positional(q, pgx.NamedArgs{"present": 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(args, []any{1, nil}) {
		t.Fatalf("args = %v, want [1 <nil>]", args)
	}
	if _, ok := namedQueries.Load(q); ok {
		t.Fatal("a rewrite with a missing name was cached")
	}
	_, args, _ = positional(q, pgx.NamedArgs{"present": 1, "absent": 2})
	if !slices.Equal(args, []any{1, 2}) {
		t.Fatalf("args = %v, want [1 2]", args)
	}
}
