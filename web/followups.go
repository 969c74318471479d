package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// FollowUpDesk is what the dashboard needs for "Tell me when this settles" (desk.FollowUps).
type FollowUpDesk interface {
	Watch(ctx context.Context, u *desk.User, opID string) (msg string, created bool, err error)
	List(ctx context.Context, u *desk.User) ([]desk.FollowUp, error)
	Unread(ctx context.Context, u *desk.User) (int, error)
	MarkRead(ctx context.Context, u *desk.User, id int64) error
	// MadeCharges is for the customer's sentence of a failed operation (ops rule 12).
	ops.MadeCharges
}

// mountFollowUps adds the follow-ups' routes: everyone who may search for support follows.
func (s *Server) mountFollowUps(support chi.Router) {
	support.Post("/ops/{id}/follow", s.handleFollow)
	support.Get("/follow-ups", s.handleFollowUps)
	support.Post("/follow-ups/{id}/read", s.handleFollowUpRead)
}

// handleFollow records that the signed-in person follows an open operation, and goes back
// to the page the button was on with the answer in words.
func (s *Server) handleFollow(w http.ResponseWriter, r *http.Request) {
	if !s.formFor(w, r, s.FollowUps != nil) {
		return
	}
	ctx := r.Context()
	id := chi.URLParam(r, "id")
	back := "/ops/" + url.PathEscape(id)
	if b := r.PostForm.Get("back"); b != "" {
		back = safeNext(r, b)
	}
	msg, created, err := s.FollowUps.Watch(ctx, userFrom(ctx), id)
	var e *ops.Error
	switch {
	case err == nil && created:
		s.putFlash(ctx, flashMsg{Kind: "ok", Message: msg})
	case err == nil:
		s.putFlash(ctx, flashMsg{Kind: "warn", Message: msg})
	case errors.As(err, &e) && e.Closed != nil:
		s.putFlash(ctx, flashMsg{Kind: "warn", Message: "Nothing to follow: " + e.Message + " The page shows the sentence to send now."})
	default:
		s.Error(w, r, err)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// handleFollowUps lists the signed-in person's follow-ups: settled ones with the outcome and
// the sentence to send, waiting ones with where they stand.
func (s *Server) handleFollowUps(w http.ResponseWriter, r *http.Request) {
	if s.FollowUps == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	u := userFrom(ctx)
	list, err := s.FollowUps.List(ctx, u)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	v := viewer(u)
	m := views.FollowUpsPage{Viewer: v, Flash: s.popFlash(ctx).view()}
	for _, f := range list {
		it, err := followUpItem(ctx, s.kind(f.Op.Kind), s.FollowUps, f, v.CanAct())
		if err != nil {
			s.Error(w, r, err)
			return
		}
		m.Items = append(m.Items, it)
	}
	s.render(w, r, http.StatusOK, views.FollowUps(m))
}

func followUpItem(ctx context.Context, spec ops.KindSpec, made ops.MadeCharges, f desk.FollowUp, canAct bool) (views.FollowUpItem, error) {
	op := f.Op
	res := supportResult(spec, op, canAct)
	c, err := customerLine(ctx, spec, made, op)
	if err != nil {
		return views.FollowUpItem{}, err
	}
	it := views.FollowUpItem{ID: strconv.FormatInt(f.ID, 10), OpID: op.ID, What: res.What, Order: res.Order, Amount: res.Amount,
		DetailURL: res.DetailURL, Customer: c, Followed: formatTime(f.CreatedAt), Settled: f.Settled(),
		Unread: f.Settled() && f.ReadAt == nil}
	if f.SettledAt != nil {
		it.SettledAt = formatTime(*f.SettledAt)
		it.Outcome = string(f.Outcome)
	}
	return it, nil
}

// handleFollowUpRead marks one settled follow-up of the signed-in person as read.
func (s *Server) handleFollowUpRead(w http.ResponseWriter, r *http.Request) {
	if !s.formFor(w, r, s.FollowUps != nil) {
		return
	}
	id, err := pathID(r, "follow-up")
	if err != nil {
		s.Error(w, r, err)
		return
	}
	ctx := r.Context()
	if err := s.FollowUps.MarkRead(ctx, userFrom(ctx), id); err != nil {
		s.Error(w, r, err)
		return
	}
	http.Redirect(w, r, "/follow-ups", http.StatusSeeOther)
}

// withFollowUpBadge puts the signed-in person's count of settled, unread follow-ups where
// the navigation reads it. The badge is a convenience: a failure to count is logged, and
// the page is served without it.
func (s *Server) withFollowUpBadge(ctx context.Context, u *desk.User) context.Context {
	if s.FollowUps == nil {
		return ctx
	}
	n, err := s.FollowUps.Unread(ctx, u)
	if err != nil {
		s.Logger.WarnContext(ctx, "count unread follow-ups", "err", err)
		return ctx
	}
	return views.WithUnreadFollowUps(ctx, n)
}

// followable offers "Tell me when this settles" on the customer line of an open operation
// when follow-ups are configured; back is the page to come back to.
func (s *Server) followable(c views.CustomerLine, op *ops.Operation, back string) views.CustomerLine {
	if s.FollowUps != nil && !op.Status.Final() {
		c.FollowURL, c.FollowBack = "/ops/"+url.PathEscape(op.ID)+"/follow", back
	}
	return c
}
