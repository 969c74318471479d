package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionStore keeps the dashboard's sessions for scs, whose failures to reach the database
// are ops.DatabaseUnreachable like every other statement's here, so a page answers them 503
// rather than 500. Expired sessions are deleted by DeleteExpiredSessions.
//
// An ended session (a sign-out, a sign-in's old token, a disabled user's) is kept as ended
// rather than deleted, for at least endedSessionKept: a request of it still in flight
// commits it when it ends, and that commit must not bring it back. scs's own pgxstore
// deletes the row, and its commit inserts it again, signed in.
type SessionStore struct{ db *DB }

// endedSessionKept is how long an ended session's row outlives its end at least: longer
// than any request of the dashboard runs.
const endedSessionKept = 24 * time.Hour

// SessionStore returns the store of the dashboard's sessions on the pool.
func (db *DB) SessionStore() *SessionStore { return &SessionStore{db: db} }

// Find implements scs.Store: the data of a live session, not ended and not expired.
func (s *SessionStore) Find(token string) ([]byte, bool, error) {
	var b []byte
	err := s.db.Pool.QueryRow(context.Background(),
		`SELECT data FROM sessions WHERE token = $1 AND current_timestamp < expiry AND NOT ended`, token).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, translate(err, "find session")
	}
	return b, true, nil
}

// Commit implements scs.Store. It never revives an ended session: the commit of a request
// that loaded it before it ended changes nothing.
func (s *SessionStore) Commit(token string, b []byte, expiry time.Time) error {
	_, err := s.db.Pool.Exec(context.Background(), `INSERT INTO sessions (token, data, expiry) VALUES ($1, $2, $3)
ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry WHERE NOT sessions.ended`, token, b, expiry)
	return translate(err, "save session")
}

// Delete implements scs.Store: it ends the session, and keeps its row as ended so that no
// commit brings it back. Its data goes: a server of an earlier version, which knows no
// ended sessions, finds nothing it could sign in with while a deployment rolls out.
func (s *SessionStore) Delete(token string) error {
	_, err := s.db.Pool.Exec(context.Background(), `UPDATE sessions SET ended = true, data = ''::bytea,
	expiry = greatest(expiry, current_timestamp + $2 * interval '1 second') WHERE token = $1`,
		token, endedSessionKept.Seconds())
	return translate(err, "delete session")
}

// All implements scs.IterableStore: every live session.
func (s *SessionStore) All() (map[string][]byte, error) {
	rows, err := s.db.Pool.Query(context.Background(),
		`SELECT token, data FROM sessions WHERE current_timestamp < expiry AND NOT ended`)
	if err != nil {
		return nil, translate(err, "list sessions")
	}
	m := map[string][]byte{}
	var token string
	var b []byte
	_, err = pgx.ForEachRow(rows, []any{&token, &b}, func() error {
		m[token] = b
		return nil
	})
	if err != nil {
		return nil, translate(err, "list sessions")
	}
	return m, nil
}

// DeleteExpiredSessions removes dashboard sessions past their expiry, ended ones included,
// and returns how many.
func (db *DB) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	tag, err := db.Pool.Exec(ctx, `DELETE FROM sessions WHERE expiry < $1`, now)
	if err != nil {
		return 0, translate(err, "delete expired sessions")
	}
	return tag.RowsAffected(), nil
}
