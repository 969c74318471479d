package deskstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

const savedViewCols = `id, page, name, query, role, created_by, created_at`

func scanSavedView(row pgx.CollectableRow) (desk.SavedView, error) {
	var v desk.SavedView
	err := row.Scan(&v.ID, &v.Page, &v.Name, &v.Query, &v.Role, &v.CreatedBy, &v.CreatedAt)
	return v, err
}

// SaveView implements desk.SavedViewStore. An author's saves on one page take turns under a
// transaction's advisory lock, so two at once cannot both find room for one more view; the
// insert's own statement, which starts after the lock, counts the views. The lock is no
// role (ops.Role): it orders two requests of one person for the length of one insert, and
// the second waits its turn rather than skipping it.
func (s *Store) SaveView(ctx context.Context, v desk.SavedView, perUser int) (desk.SavedView, error) {
	var out desk.SavedView
	err := pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('saved_views ' || $1), hashtext($2))`, v.Page, v.CreatedBy); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `INSERT INTO saved_views (page, name, query, role, created_by, created_at)
SELECT $1, $2, $3, $4, $5, $6
WHERE (SELECT count(*) FROM saved_views WHERE page = $1 AND created_by = $5) < $7
RETURNING `+savedViewCols, v.Page, v.Name, v.Query, string(v.Role), v.CreatedBy, v.CreatedAt, perUser)
		if err != nil {
			return err
		}
		out, err = pgx.CollectExactlyOneRow(rows, scanSavedView)
		if errors.Is(err, pgx.ErrNoRows) {
			return desk.ErrSavedViewLimit
		}
		return err
	})
	if errors.Is(err, desk.ErrSavedViewLimit) {
		return v, err
	}
	return out, pg.Interpret(err, "save view")
}

// ListSavedViews implements desk.SavedViewStore. The filter is cut in the statement, so a
// view saved before filters were bounded costs a page at most a kilobyte.
func (s *Store) ListSavedViews(ctx context.Context, page string, roles []desk.Role, viewer string, limit int) (desk.SavedViewList, error) {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	rows, err := s.db.Pool.Query(ctx, `
WITH v AS (
	SELECT id, page, left(name, @name_max) AS name, left(query, @query_max + 1) AS query, role, created_by, created_at,
		created_by = @viewer AS own, row_number() OVER (PARTITION BY created_by ORDER BY lower(name), id) AS turn
	FROM saved_views WHERE page = @page AND role = ANY(@roles)
), own AS (
	SELECT *, count(*) OVER () AS total, row_number() OVER (ORDER BY lower(name), id) AS pos
	FROM v WHERE own ORDER BY pos LIMIT @limit
), shared AS (
	SELECT *, count(*) OVER () AS total, row_number() OVER (ORDER BY turn, lower(name), id) AS pos
	FROM v WHERE NOT own ORDER BY pos LIMIT @limit
)
SELECT `+savedViewCols+`, own, total FROM (SELECT * FROM own UNION ALL SELECT * FROM shared) l ORDER BY own DESC, pos`,
		pgx.NamedArgs{"page": page, "roles": names, "viewer": viewer, "limit": limit,
			"name_max": desk.MaxSavedViewName, "query_max": desk.MaxSavedViewQuery})
	if err != nil {
		return desk.SavedViewList{}, pg.Interpret(err, "list saved views")
	}
	defer rows.Close()
	var l desk.SavedViewList
	for rows.Next() {
		var v desk.SavedView
		var own bool
		var total int
		if err := rows.Scan(&v.ID, &v.Page, &v.Name, &v.Query, &v.Role, &v.CreatedBy, &v.CreatedAt, &own, &total); err != nil {
			return l, pg.Interpret(err, "list saved views")
		}
		if own {
			l.Own, l.OwnTotal = append(l.Own, v), total
		} else {
			l.Shared, l.SharedTotal = append(l.Shared, v), total
		}
	}
	return l, pg.Interpret(rows.Err(), "list saved views")
}

// GetSavedView implements desk.SavedViewStore.
func (s *Store) GetSavedView(ctx context.Context, id int64) (desk.SavedView, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT `+savedViewCols+` FROM saved_views WHERE id = $1`, id)
	if err != nil {
		return desk.SavedView{}, pg.Interpret(err, "read saved view")
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanSavedView)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, ops.Errorf(ops.ENOTFOUND, "There is no saved view %d.", id)
	}
	return v, pg.Interpret(err, "read saved view")
}

// DeleteSavedView implements desk.SavedViewStore.
func (s *Store) DeleteSavedView(ctx context.Context, id int64) error {
	tag, err := s.db.Pool.Exec(ctx, `DELETE FROM saved_views WHERE id = $1`, id)
	if err != nil {
		return pg.Interpret(err, "delete saved view")
	}
	if tag.RowsAffected() == 0 {
		// Deleted meanwhile (a double click, or its author in another tab): this delete
		// deleted nothing and must not be recorded as having done so.
		return ops.Errorf(ops.ENOTFOUND, "There is no saved view %d: it was deleted meanwhile.", id)
	}
	return nil
}
