package main

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// The product hashes every password it stores at bcrypt's default cost, both the one
// `settle user add` stores and the one an admin adds on the served dashboard. Tests may make
// their accounts' store hash at a lower cost to run faster; this test fails if that cost
// reaches the product's wiring, where it would make stolen hashes cheap to guess.
func TestProductHashesPasswordsAtTheDefaultCost(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(pgtest.NewDatabase(t))
	vars := map[string]string{"DATABASE_URL": dbURL}

	const adminPassword = "correct horse battery"
	code, _, stderr := run(t, []string{"user", "add", "--email", "admin@example.com", "--role", "admin"}, vars, adminPassword+"\n")
	if code != 0 {
		t.Fatalf("user add: exit %d, stderr %q", code, stderr)
	}

	p := serveWith(t, vars)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path string, form url.Values) {
		t.Helper()
		resp, err := c.PostForm(p.URL()+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %d, want 303", path, resp.StatusCode)
		}
	}
	post("/login", url.Values{"email": {"admin@example.com"}, "password": {adminPassword}})
	post("/admin/users", url.Values{"email": {"support@example.com"}, "password": {"another long phrase"}, "role": {"support"}})

	for _, email := range []string{"admin@example.com", "support@example.com"} {
		if got := storedHashCost(t, p.DB, email); got != bcrypt.DefaultCost {
			t.Errorf("%s's password is hashed at cost %d, want bcrypt's default %d", email, got, bcrypt.DefaultCost)
		}
	}
}

func storedHashCost(t *testing.T, db *pg.DB, email string) int {
	t.Helper()
	var hash string
	if err := db.Pool.QueryRow(context.Background(), `SELECT password_hash FROM users WHERE email = $1`, email).Scan(&hash); err != nil {
		t.Fatalf("read %s's hash: %v", email, err)
	}
	cost, err := bcrypt.Cost([]byte(hash))
	if err != nil {
		t.Fatalf("%s's hash %q: %v", email, hash, err)
	}
	return cost
}
