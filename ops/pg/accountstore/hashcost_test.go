package accountstore_test

import (
	"context"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// A store hashes at bcrypt's default cost unless it is made with another, and a user hashed
// at a lower cost still signs in, on that store or on one at the default cost.
func TestStoreHashesAtItsCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	if got := accountstore.New(db).HashCost(); got != bcrypt.DefaultCost {
		t.Fatalf("New's cost is %d, want bcrypt's default %d", got, bcrypt.DefaultCost)
	}
	cheap := accountstore.New(db, accountstore.WithHashCost(bcrypt.MinCost))
	if _, err := cheap.CreateUser(ctx, "oncall@example.com", "correct horse battery", desk.RoleOncall); err != nil {
		t.Fatal(err)
	}
	var hash string
	if err := db.Pool.QueryRow(ctx, `SELECT password_hash FROM users WHERE email = 'oncall@example.com'`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost != bcrypt.MinCost {
		t.Fatalf("stored hash's cost %d (%v), want %d", cost, err, bcrypt.MinCost)
	}
	for _, s := range []*accountstore.Store{cheap, accountstore.New(db)} {
		if _, err := s.Authenticate(ctx, "oncall@example.com", "correct horse battery"); err != nil {
			t.Errorf("sign-in at cost %d: %v", s.HashCost(), err)
		}
		if _, err := s.Authenticate(ctx, "nobody@example.com", "correct horse battery"); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
			t.Errorf("an unknown email at cost %d: %v, want EUNAUTHORIZED", s.HashCost(), err)
		}
	}
}
