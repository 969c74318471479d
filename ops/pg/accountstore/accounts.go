// Package accountstore holds the statements on the dashboard's accounts: its users (users),
// the people an identity provider signs in, who vouched for an account in the audit log,
// and the administration of the API tokens (api_tokens, with their audit rows). It
// implements desk.Accounts, desk.People and desk.ExternalUsers on the pool of ops/pg, which
// keeps the tenants and finds a request's tenant by its token, as the ledger's API needs.
package accountstore

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

var (
	_ desk.Accounts      = (*Store)(nil)
	_ desk.People        = (*Store)(nil)
	_ desk.ExternalUsers = (*Store)(nil)
)

// Store is the accounts' store on db's pool.
type Store struct {
	db *pg.DB
	// audit writes the audit rows of account changes that a caller records after the change.
	audit *deskstore.Store
	// hashCost is the bcrypt cost of the passwords CreateUser hashes and of the comparison an
	// unknown email's login makes.
	hashCost int
}

// Option changes a Store that New returns.
type Option func(*Store)

// WithHashCost hashes new passwords with bcrypt at cost instead of bcrypt.DefaultCost. It is
// for tests that create many users, where the default cost's tens of milliseconds of CPU per
// hash are most of their time: a lower cost makes the hashes cheap to guess, so the product
// never passes it.
func WithHashCost(cost int) Option { return func(s *Store) { s.hashCost = cost } }

// New returns the accounts' store on db, hashing passwords at bcrypt.DefaultCost unless an
// option says otherwise.
func New(db *pg.DB, opts ...Option) *Store {
	s := &Store{db: db, audit: deskstore.New(db), hashCost: bcrypt.DefaultCost}
	for _, o := range opts {
		o(s)
	}
	return s
}

// HashCost is the bcrypt cost at which the store hashes new passwords.
func (s *Store) HashCost() int { return s.hashCost }

// EnsureTenant implements ops.TenantStore with the ledger's store's statement.
func (s *Store) EnsureTenant(ctx context.Context, name string) (*ops.Tenant, error) {
	return s.db.EnsureTenant(ctx, name)
}

// CreateToken implements ops.TenantStore with the ledger's store's statement.
func (s *Store) CreateToken(ctx context.Context, tenantID int64, name string) (string, error) {
	return s.db.CreateToken(ctx, tenantID, name)
}

// TenantByToken implements ops.TenantStore with the ledger's store's statement.
func (s *Store) TenantByToken(ctx context.Context, token string) (*ops.Tenant, error) {
	return s.db.TenantByToken(ctx, token)
}

// Tenants implements ops.TenantStore with the ledger's store's statement.
func (s *Store) Tenants(ctx context.Context) ([]*ops.Tenant, error) { return s.db.Tenants(ctx) }

// RecordAudit records an account change in the audit log, for a change whose row its
// caller writes after it (an admin's new user).
func (s *Store) RecordAudit(ctx context.Context, e desk.AuditLogEntry) error {
	return s.audit.RecordAudit(ctx, e)
}

// MinPasswordLength is the shortest password CreateUser accepts.
const MinPasswordLength = 10

// dummyHashes holds, by bcrypt cost, a hash that a login compares against when no user has
// the email, so a failed login takes as long whether or not the account exists. It is made
// once per cost, on first use: a store is cheap to make and many are made.
var dummyHashes sync.Map

func dummyPasswordHash(cost int) []byte {
	if h, ok := dummyHashes.Load(cost); ok {
		return h.([]byte)
	}
	h, err := bcrypt.GenerateFromPassword([]byte("settle-no-such-user"), cost)
	if err != nil {
		// Only a cost above bcrypt.MaxCost fails, and CreateUser fails at that cost too.
		return nil
	}
	h2, _ := dummyHashes.LoadOrStore(cost, h)
	return h2.([]byte)
}

const accountUserCols = "id, email, role, created_at, session_generation"

func scanAccountUser(row pgx.Row) (*desk.User, error) {
	u := &desk.User{}
	var role string
	if err := row.Scan(&u.ID, &u.Email, &role, &u.CreatedAt, &u.SessionGeneration); err != nil {
		return nil, err
	}
	u.Role = desk.Role(role)
	return u, nil
}

// CreateUser adds a dashboard user with a bcrypt hash of the password.
func (s *Store) CreateUser(ctx context.Context, email, password string, role desk.Role) (*desk.User, error) {
	email, err := normalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if !role.Valid() {
		return nil, ops.Errorf(ops.EINVALID, "Unknown role %q; use one of support, oncall, manager, admin.", role)
	}
	if len(password) < MinPasswordLength {
		return nil, ops.Errorf(ops.EINVALID, "The password must be at least %d characters long.", MinPasswordLength)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.hashCost)
	if errors.Is(err, bcrypt.ErrPasswordTooLong) {
		return nil, ops.Errorf(ops.EINVALID, "The password must be at most 72 bytes long.")
	} else if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	u, err := scanAccountUser(s.db.Pool.QueryRow(ctx,
		`INSERT INTO users (email, password_hash, role) VALUES ($1, $2, $3) RETURNING `+accountUserCols,
		email, string(hash), string(role)))
	if pg.SQLState(err) == "23505" {
		return nil, &ops.Error{Code: ops.ECONFLICT, Message: fmt.Sprintf("A user with email %s already exists.", email), Err: err}
	} else if err != nil {
		return nil, pg.Translate(err, "create user")
	}
	return u, nil
}

// normalizeEmail accepts a bare address only: a display name or several addresses in the
// field are almost always a paste mistake. The address must also show other people who
// holds the account (desk.CheckEmailShows).
func normalizeEmail(email string) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return "", ops.Errorf(ops.EINVALID, "%+q is not an email address.", email)
	}
	if err := desk.CheckEmailShows(email); err != nil {
		return "", err
	}
	return email, nil
}

// Authenticate returns the enabled user with that email and password, or EUNAUTHORIZED. It
// never says which of the two was wrong.
func (s *Store) Authenticate(ctx context.Context, email, password string) (*desk.User, error) {
	wrong := ops.Errorf(ops.EUNAUTHORIZED, "The email or password is wrong.")
	email = strings.ToLower(strings.TrimSpace(email))
	// Anyone may send anything as an email; what is no address names no account, and a NUL
	// or bytes that are not UTF-8 would fail the query. It takes as long as an unknown one.
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email {
		_ = bcrypt.CompareHashAndPassword(dummyPasswordHash(s.hashCost), []byte(password))
		return nil, wrong
	}
	var hash string
	u := &desk.User{}
	var role string
	err := s.db.Pool.QueryRow(ctx,
		`SELECT id, email, role, created_at, session_generation, coalesce(password_hash, '') FROM users
		 WHERE lower(email) = $1 AND disabled_at IS NULL`, email).
		Scan(&u.ID, &u.Email, &role, &u.CreatedAt, &u.SessionGeneration, &hash)
	// A user of an identity provider has no password, and is answered as an unknown one.
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && hash == "") {
		_ = bcrypt.CompareHashAndPassword(dummyPasswordHash(s.hashCost), []byte(password))
		return nil, wrong
	} else if err != nil {
		return nil, pg.Translate(err, "find user")
	}
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)); err != nil {
		return nil, wrong
	}
	u.Role = desk.Role(role)
	return u, nil
}

// UserByID returns one enabled user or ENOTFOUND; a disabled user's sessions stop working.
func (s *Store) UserByID(ctx context.Context, id int64) (*desk.User, error) {
	u, err := scanAccountUser(s.db.Pool.QueryRow(ctx,
		`SELECT `+accountUserCols+` FROM users WHERE id = $1 AND disabled_at IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &ops.Error{Code: ops.ENOTFOUND, Message: fmt.Sprintf("No user with id %d.", id), Err: err}
	} else if err != nil {
		return nil, pg.Translate(err, fmt.Sprintf("find user %d", id))
	}
	return u, nil
}
