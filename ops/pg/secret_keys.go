package pg

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SecretKey returns the random key of size bytes kept under name, created by the first
// caller: every server on one database reads the same key, so what one seals another
// opens. A key once created never changes.
func (db *DB) SecretKey(ctx context.Context, name string, size int, now time.Time) ([]byte, error) {
	key, err := db.secretKey(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		fresh := make([]byte, size)
		_, _ = rand.Read(fresh)
		// Two servers starting at once both insert; the second's insert does nothing, and
		// its read, a statement of its own, sees the first one's key.
		if _, err := db.Pool.Exec(ctx, `INSERT INTO secret_keys (name, key, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO NOTHING`, name, fresh, now); err != nil {
			return nil, fmt.Errorf("create the %s key: %w", name, err)
		}
		key, err = db.secretKey(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read the %s key: %w", name, err)
	}
	if len(key) != size {
		return nil, fmt.Errorf("the %s key has %d bytes, not %d", name, len(key), size)
	}
	return key, nil
}

func (db *DB) secretKey(ctx context.Context, name string) ([]byte, error) {
	var key []byte
	err := db.Pool.QueryRow(ctx, `SELECT key FROM secret_keys WHERE name = $1`, name).Scan(&key)
	return key, err
}
