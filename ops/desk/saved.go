package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/settle-dev/settle/ops"
)

// The dashboard pages a saved view may filter, with the least role that sees each page.
const (
	PageQueue      = "ops"
	PageReconcile  = "reconcile"
	PageExceptions = "exceptions"
)

// SavedViewPages are the pages with saved views and the least role each page needs: a view
// shared with a role that cannot open its page would be shared with nobody.
var SavedViewPages = map[string]Role{PageQueue: RoleSupport, PageReconcile: RoleManager, PageExceptions: RoleOncall}

// MaxSavedViewName bounds a saved view's name; MaxSavedViewsPerPage bounds how many one page
// offers, so its counts stay a handful of queries.
const (
	MaxSavedViewName     = 80
	MaxSavedViewsPerPage = 20
)

// SavedView is a named filter of a dashboard page, kept in Postgres and shared with everyone
// of a role and above, for example "refunds unknown over 1 h, tenant acme" for on-call.
type SavedView struct {
	ID   int64
	Page string
	Name string
	// Query is the page's filter as a URL query, already checked by the page's own parser.
	Query     string
	Role      Role
	CreatedBy string
	CreatedAt time.Time
}

// SavedViewStore keeps saved views.
type SavedViewStore interface {
	// SaveView adds a view; a name taken on the same page is an ECONFLICT.
	SaveView(ctx context.Context, v SavedView) (SavedView, error)
	// ListSavedViews lists the views of page shared with any of roles, by name.
	ListSavedViews(ctx context.Context, page string, roles []Role) ([]SavedView, error)
	GetSavedView(ctx context.Context, id int64) (SavedView, error)
	DeleteSavedView(ctx context.Context, id int64) error
}

// SavedViews is the team's named filters: everyone saves, those who share a role see, the
// author or an admin deletes, and every change is in the audit log.
type SavedViews struct {
	Store SavedViewStore
	Audit AuditWriter
	Clock ops.Clock
}

// Visible lists the views of page that someone with role sees.
func (s *SavedViews) Visible(ctx context.Context, page string, role Role) ([]SavedView, error) {
	var roles []Role
	for _, r := range Roles {
		if role.AtLeast(r) {
			roles = append(roles, r)
		}
	}
	return s.Store.ListSavedViews(ctx, page, roles)
}

// Save checks and keeps a view for v.Page made by actor.
func (s *SavedViews) Save(ctx context.Context, v SavedView, actor string) (SavedView, error) {
	v.Name = strings.TrimSpace(v.Name)
	least, ok := SavedViewPages[v.Page]
	switch {
	case !ok:
		return v, ops.Errorf(ops.EINVALID, "Views can be saved on the queues, the reconciliation and the exceptions pages only.")
	case v.Name == "" || utf8.RuneCountInString(v.Name) > MaxSavedViewName || !printableName(v.Name):
		return v, ops.Errorf(ops.EINVALID, "Name the view in 1 to %d letters, digits or punctuation.", MaxSavedViewName)
	case !v.Role.Valid():
		return v, ops.Errorf(ops.EINVALID, "Choose whom to share the view with: support, oncall, manager or admin.")
	case !v.Role.AtLeast(least):
		return v, ops.Errorf(ops.EINVALID, "People with the %s role cannot open this page; share the view with %s or above.", v.Role, least)
	}
	v.CreatedBy, v.CreatedAt = actor, s.Clock.Now()
	saved, err := s.Store.SaveView(ctx, v)
	var oe *ops.Error
	if errors.As(err, &oe) && oe.Code == ops.ECONFLICT {
		return v, ops.Errorf(ops.ECONFLICT, "A view named %q already exists on this page; choose another name.", v.Name)
	}
	if err != nil {
		return v, err
	}
	return saved, s.audit(ctx, saved, "saved_view.add", actor)
}

// Delete removes a view; only its author or an admin may.
func (s *SavedViews) Delete(ctx context.Context, id int64, actor string, role Role) (SavedView, error) {
	v, err := s.Store.GetSavedView(ctx, id)
	if err != nil {
		return v, err
	}
	if v.CreatedBy != actor && !role.AtLeast(RoleAdmin) {
		return v, ops.Errorf(ops.EFORBIDDEN, "Only %s, who saved it, or an admin may delete the view %q.", v.CreatedBy, v.Name)
	}
	if err := s.Store.DeleteSavedView(ctx, id); err != nil {
		return v, err
	}
	return v, s.audit(ctx, v, "saved_view.delete", actor)
}

func (s *SavedViews) audit(ctx context.Context, v SavedView, action, actor string) error {
	if s.Audit == nil {
		return nil
	}
	after, err := json.Marshal(map[string]string{"page": v.Page, "name": v.Name, "query": v.Query, "role": string(v.Role)})
	if err != nil {
		return fmt.Errorf("audit saved view: %w", err)
	}
	return s.Audit.RecordAudit(ctx, AuditLogEntry{At: s.Clock.Now(), Actor: actor, Action: action, Entity: "saved_view",
		EntityID: fmt.Sprint(v.ID), After: after})
}

func printableName(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}
