package desk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
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

// Saved views are bounded, so that one person's views cannot make every page that offers
// them large or slow, nor crowd out everyone else's:
//   - MaxSavedViewName bounds a view's name, in characters;
//   - MaxSavedViewQuery bounds its filter, in bytes of the URL query: a page's filter is a
//     few short values, and a view kept from before that is longer is offered as too long
//     to open, to be deleted;
//   - MaxSavedViewsPerUser bounds the views one person keeps on one page;
//   - MaxSavedViewsPerPage bounds the views a page offers, so its counts stay a handful of
//     queries. A person's own views take at most MaxSavedViewsPerUser of its places, and
//     the views others shared the rest, taken in turn from each author.
//
// The store's table holds the same bounds on the name and the filter (migration 00043).
const (
	MaxSavedViewName     = 80
	MaxSavedViewQuery    = 1024
	MaxSavedViewsPerUser = 10
	MaxSavedViewsPerPage = 20
)

// ErrSavedViewLimit is what a SavedViewStore answers when the author keeps
// MaxSavedViewsPerUser views on the page already.
var ErrSavedViewLimit = errors.New("the author keeps the most saved views a page allows")

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

// SavedViewList is the views of a page that one person sees, in two parts: their own and
// the ones others shared. Each part holds at most the limit asked for; the totals count the
// whole part.
type SavedViewList struct {
	// Own is the person's own views, by name.
	Own      []SavedView
	OwnTotal int
	// Shared is the views others shared, taken in turn from each author: every author's
	// first view by name, then every author's second, and so on, by name within a turn.
	Shared      []SavedView
	SharedTotal int
}

// SavedViewStore keeps saved views.
type SavedViewStore interface {
	// SaveView adds a view; a name taken on the same page is an ECONFLICT, and an author
	// who keeps perUser views on the page already gets ErrSavedViewLimit.
	SaveView(ctx context.Context, v SavedView, perUser int) (SavedView, error)
	// ListSavedViews lists the views of page shared with any of roles, as viewer (an
	// email) sees them, at most limit in each part. A view's Query is cut after
	// MaxSavedViewQuery+1 bytes, so one longer than MaxSavedViewQuery says so by its length.
	ListSavedViews(ctx context.Context, page string, roles []Role, viewer string, limit int) (SavedViewList, error)
	GetSavedView(ctx context.Context, id int64) (SavedView, error)
	// DeleteSavedView removes a view; one already gone is an ENOTFOUND.
	DeleteSavedView(ctx context.Context, id int64) error
}

// SavedViews is the team's named filters: everyone saves, those who share a role see, the
// author or an admin deletes, and every change is in the audit log.
type SavedViews struct {
	Store SavedViewStore
	Audit AuditWriter
	Clock ops.Clock
}

// Offered is what a page offers one person of its saved views: at most
// MaxSavedViewsPerPage, by name, and how many more they could see.
type Offered struct {
	Views  []SavedView
	Hidden int
}

// Visible is the views of page that viewer, with role, is offered. Their own views take at
// most MaxSavedViewsPerUser places, or more when others shared too few to fill the rest;
// the places left go to the views others shared, in turn from each author.
func (s *SavedViews) Visible(ctx context.Context, page, viewer string, role Role) (Offered, error) {
	var roles []Role
	for _, r := range Roles {
		if role.AtLeast(r) {
			roles = append(roles, r)
		}
	}
	l, err := s.Store.ListSavedViews(ctx, page, roles, viewer, MaxSavedViewsPerPage)
	if err != nil {
		return Offered{}, err
	}
	own := min(len(l.Own), max(MaxSavedViewsPerUser, MaxSavedViewsPerPage-len(l.Shared)))
	shared := min(len(l.Shared), MaxSavedViewsPerPage-own)
	o := Offered{Views: append(append([]SavedView{}, l.Own[:own]...), l.Shared[:shared]...),
		Hidden: l.OwnTotal + l.SharedTotal - own - shared}
	slices.SortStableFunc(o.Views, func(a, b SavedView) int {
		return cmp.Or(strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), cmp.Compare(a.ID, b.ID))
	})
	return o, nil
}

// Openable reports whether the view's filter is within MaxSavedViewQuery, which every view
// saved since the bound is.
func (v SavedView) Openable() bool { return len(v.Query) <= MaxSavedViewQuery }

// Save checks and keeps a view for v.Page made by actor.
func (s *SavedViews) Save(ctx context.Context, v SavedView, actor string) (SavedView, error) {
	v.Name = strings.TrimSpace(v.Name)
	least, ok := SavedViewPages[v.Page]
	switch {
	case !ok:
		return v, ops.Errorf(ops.EINVALID, "Views can be saved on the queues, the reconciliation and the exceptions pages only.")
	case v.Name == "" || utf8.RuneCountInString(v.Name) > MaxSavedViewName || !ops.Shows(v.Name):
		return v, ops.Errorf(ops.EINVALID, "Name the view in 1 to %d letters, digits or punctuation.", MaxSavedViewName)
	case !v.Openable():
		return v, ops.Errorf(ops.EINVALID, "This filter is too long to save (over %d bytes); narrow it to a few short values.", MaxSavedViewQuery)
	case !v.Role.Valid():
		return v, ops.Errorf(ops.EINVALID, "Choose whom to share the view with: support, oncall, manager or admin.")
	case !v.Role.AtLeast(least):
		return v, ops.Errorf(ops.EINVALID, "People with the %s role cannot open this page; share the view with %s or above.", v.Role, least)
	}
	v.CreatedBy, v.CreatedAt = actor, s.Clock.Now()
	saved, err := s.Store.SaveView(ctx, v, MaxSavedViewsPerUser)
	var oe *ops.Error
	if errors.As(err, &oe) && oe.Code == ops.ECONFLICT {
		if same, ok := s.savedAlready(ctx, v); ok {
			return same, nil
		}
		return v, ops.Errorf(ops.ECONFLICT, "A view named %q already exists on this page; choose another name.", v.Name)
	}
	if errors.Is(err, ErrSavedViewLimit) {
		return v, ops.Errorf(ops.EINVALID, "You keep %d views on this page already, the most anyone may; delete one of yours to save another.", MaxSavedViewsPerUser)
	}
	if err != nil {
		return v, err
	}
	return saved, s.audit(ctx, saved, "saved_view.add", actor)
}

// savedAlready finds the view v repeats: the author's own view of the same name, filter and
// role, saved by a double click or a form sent again from the back button. It is the one
// view asked for, so the repeat answers with it and records nothing a second time.
func (s *SavedViews) savedAlready(ctx context.Context, v SavedView) (SavedView, bool) {
	l, err := s.Store.ListSavedViews(ctx, v.Page, []Role{v.Role}, v.CreatedBy, MaxSavedViewsPerPage)
	if err != nil {
		return v, false
	}
	for _, o := range l.Own {
		if strings.EqualFold(o.Name, v.Name) && o.Query == v.Query && o.Role == v.Role {
			return o, true
		}
	}
	return v, false
}

// Delete removes a view; only its author or an admin may.
func (s *SavedViews) Delete(ctx context.Context, id int64, actor string, role Role) (SavedView, error) {
	v, err := s.Store.GetSavedView(ctx, id)
	if err != nil {
		return v, err
	}
	// A view shared above the person's role is one they are not offered: answered as none,
	// its name and author stay unseen.
	if v.CreatedBy != actor && !role.AtLeast(v.Role) {
		return SavedView{}, ops.Errorf(ops.ENOTFOUND, "There is no saved view %d.", id)
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
