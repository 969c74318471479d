package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

var _ desk.SavedViewStore = (*DB)(nil)

const savedViewCols = `id, page, name, query, role, created_by, created_at`

func scanSavedView(row pgx.CollectableRow) (desk.SavedView, error) {
	var v desk.SavedView
	err := row.Scan(&v.ID, &v.Page, &v.Name, &v.Query, &v.Role, &v.CreatedBy, &v.CreatedAt)
	return v, err
}

// SaveView implements desk.SavedViewStore.
func (db *DB) SaveView(ctx context.Context, v desk.SavedView) (desk.SavedView, error) {
	rows, err := db.Pool.Query(ctx, `INSERT INTO saved_views (page, name, query, role, created_by, created_at)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+savedViewCols, v.Page, v.Name, v.Query, string(v.Role), v.CreatedBy, v.CreatedAt)
	if err != nil {
		return v, interpret(err, "save view")
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanSavedView)
	return out, interpret(err, "save view")
}

// ListSavedViews implements desk.SavedViewStore.
func (db *DB) ListSavedViews(ctx context.Context, page string, roles []desk.Role) ([]desk.SavedView, error) {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	rows, err := db.Pool.Query(ctx, `SELECT `+savedViewCols+` FROM saved_views WHERE page = $1 AND role = ANY($2)
ORDER BY lower(name) LIMIT $3`, page, names, desk.MaxSavedViewsPerPage)
	if err != nil {
		return nil, interpret(err, "list saved views")
	}
	list, err := pgx.CollectRows(rows, scanSavedView)
	return list, interpret(err, "list saved views")
}

// GetSavedView implements desk.SavedViewStore.
func (db *DB) GetSavedView(ctx context.Context, id int64) (desk.SavedView, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+savedViewCols+` FROM saved_views WHERE id = $1`, id)
	if err != nil {
		return desk.SavedView{}, interpret(err, "read saved view")
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanSavedView)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, ops.Errorf(ops.ENOTFOUND, "There is no saved view %d.", id)
	}
	return v, interpret(err, "read saved view")
}

// DeleteSavedView implements desk.SavedViewStore.
func (db *DB) DeleteSavedView(ctx context.Context, id int64) error {
	_, err := db.Pool.Exec(ctx, `DELETE FROM saved_views WHERE id = $1`, id)
	return interpret(err, "delete saved view")
}
