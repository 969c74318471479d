package accountstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestCreateUserAndAuthenticate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := accountstore.New(pgtest.New(t))

	u, err := db.CreateUser(ctx, " Oncall@Example.com ", "correct horse battery", desk.RoleOncall)
	if err != nil {
		t.Fatal(err)
	}
	if u.ID == 0 || u.Email != "oncall@example.com" || u.Role != desk.RoleOncall || u.CreatedAt.IsZero() {
		t.Fatalf("created %+v", u)
	}

	got, err := db.Authenticate(ctx, "ONCALL@example.com", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != u.ID || got.Role != desk.RoleOncall {
		t.Fatalf("authenticated %+v, want %+v", got, u)
	}

	for _, tc := range []struct{ email, password string }{
		{"oncall@example.com", "wrong password!"},
		{"nobody@example.com", "correct horse battery"},
	} {
		u, err := db.Authenticate(ctx, tc.email, tc.password)
		if ops.ErrorCode(err) != ops.EUNAUTHORIZED || u != nil {
			t.Errorf("Authenticate(%q, %q) = %v, %v; want unauthorized", tc.email, tc.password, u, err)
		}
	}

	byID, err := db.UserByID(ctx, u.ID)
	if err != nil || byID.Email != u.Email {
		t.Fatalf("UserByID = %+v, %v", byID, err)
	}
	if u, err := db.UserByID(ctx, u.ID+1000); ops.ErrorCode(err) != ops.ENOTFOUND || u != nil {
		t.Fatalf("UserByID(missing) = %v, %v; want not_found", u, err)
	}
}

func TestCreateUserRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := accountstore.New(pgtest.New(t))
	if _, err := db.CreateUser(ctx, "a@example.com", "long enough password", desk.RoleSupport); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, email, password string
		role                  desk.Role
		code                  string
	}{
		{"short password", "b@example.com", "short", desk.RoleSupport, ops.EINVALID},
		{"bad email", "not-an-email", "long enough password", desk.RoleSupport, ops.EINVALID},
		{"display name", "Bob <b@example.com>", "long enough password", desk.RoleSupport, ops.EINVALID},
		{"bad role", "b@example.com", "long enough password", desk.Role("root"), ops.EINVALID},
		{"too long", "b@example.com", strings.Repeat("x", 73), desk.RoleSupport, ops.EINVALID},
		{"duplicate", "A@example.com", "long enough password", desk.RoleAdmin, ops.ECONFLICT},
	} {
		u, err := db.CreateUser(ctx, tc.email, tc.password, tc.role)
		if ops.ErrorCode(err) != tc.code || u != nil {
			t.Errorf("%s: CreateUser = %v, %v; want %s", tc.name, u, err, tc.code)
		}
	}
}
