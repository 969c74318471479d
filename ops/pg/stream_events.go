package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// StreamEvents implements llm.StoredStreams: the events stored with an operation's answer,
// read apart from the operation itself, since only a streamed replay needs them and they
// may be several times the answer's size. nil when there are none, or the purge deleted them.
func (db *DB) StreamEvents(ctx context.Context, opID string) ([]byte, error) {
	var events []byte
	err := db.Pool.QueryRow(ctx, `SELECT stream_events::text FROM operations WHERE id = $1`, opID).Scan(&events)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return events, interpret(err, "read the events of a stream")
}
