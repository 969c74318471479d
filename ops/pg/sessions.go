package pg

import (
	"context"
	"time"

	"github.com/alexedwards/scs/pgxstore"
)

// SessionStore keeps the dashboard's sessions: scs's pgxstore on the pool, whose failures to
// reach the database are ops.DatabaseUnreachable like every other statement's here, so a
// page answers them 503 rather than 500. Expired sessions are deleted by
// DeleteExpiredSessions, not by pgxstore's own cleanup goroutine.
type SessionStore struct{ s *pgxstore.PostgresStore }

// SessionStore returns the store of the dashboard's sessions on the pool.
func (db *DB) SessionStore() *SessionStore {
	return &SessionStore{pgxstore.NewWithCleanupInterval(db.Pool, 0)}
}

// Find implements scs.Store.
func (s *SessionStore) Find(token string) ([]byte, bool, error) {
	b, found, err := s.s.Find(token)
	return b, found, translate(err, "find session")
}

// Commit implements scs.Store.
func (s *SessionStore) Commit(token string, b []byte, expiry time.Time) error {
	return translate(s.s.Commit(token, b, expiry), "save session")
}

// Delete implements scs.Store.
func (s *SessionStore) Delete(token string) error {
	return translate(s.s.Delete(token), "delete session")
}

// All implements scs.IterableStore.
func (s *SessionStore) All() (map[string][]byte, error) {
	m, err := s.s.All()
	return m, translate(err, "list sessions")
}

// DeleteExpiredSessions removes dashboard sessions past their expiry and returns how many.
// The server calls it periodically instead of pgxstore's own cleanup goroutine, which
// cannot be stopped without a data race.
func (db *DB) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	tag, err := db.Pool.Exec(ctx, `DELETE FROM sessions WHERE expiry < $1`, now)
	if err != nil {
		return 0, translate(err, "delete expired sessions")
	}
	return tag.RowsAffected(), nil
}
