package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// SavedViews keeps the team's named filters.
type SavedViews interface {
	Visible(ctx context.Context, page, viewer string, role desk.Role) (desk.Offered, error)
	Save(ctx context.Context, v desk.SavedView, actor string) (desk.SavedView, error)
	Delete(ctx context.Context, id int64, actor string, role desk.Role) (desk.SavedView, error)
}

// savedViewPaths are where each page with saved views lives, and the query keys of its
// filter: the keys its parser reads (parseQueueFilter, parseReconQuery,
// parseExceptionsFilter), and no other. A saved view keeps these only, so it always opens at
// the first page of its results (the paging keys are not filters) and an address's other
// keys, whatever their length, are never saved nor offered again.
var savedViewPaths = map[string]struct {
	path    string
	filters []string
}{
	desk.PageQueue:      {"/ops", []string{"tab", "tenant", "kind", "provider", "age", "q", "awaiting"}},
	desk.PageReconcile:  {"/reconcile", []string{"range", "bucket", "tenant", "kind", "provider", "api"}},
	desk.PageExceptions: {"/reconcile/exceptions", []string{"status", "kind", "severity"}},
}

// maxSaveViewForm bounds the body of the form that saves a view: a name of
// desk.MaxSavedViewName characters and a filter of desk.MaxSavedViewQuery bytes, each
// percent-encoded, fit in it with room to spare.
const maxSaveViewForm = 8 << 10

// mountSavedViews adds saving and deleting views; anyone signed in may save one for a page
// they can open, which the page's own filter check decides.
func (s *Server) mountSavedViews(r chi.Router) {
	support := s.forRole(r, desk.RoleSupport)
	support.Post("/views", s.handleSaveView)
	support.Post("/views/{id}/delete", s.handleDeleteView)
}

func (s *Server) handleSaveView(w http.ResponseWriter, r *http.Request) {
	if s.SavedViews == nil {
		s.notConfigured(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSaveViewForm)
	if err := r.ParseForm(); err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			s.Error(w, r, &ops.Error{Code: ETOOLARGE, Message: fmt.Sprintf(
				"This view is too large to save (the form is over %d KB); give it a short name and save it from the page.", maxSaveViewForm>>10)})
		} else {
			s.Error(w, r, ops.Errorf(ops.EINVALID, "The form could not be read."))
		}
		return
	}
	ctx := r.Context()
	page := r.PostForm.Get("page")
	p, ok := savedViewPaths[page]
	u := userFrom(ctx)
	if !ok || !u.Role.AtLeast(desk.SavedViewPages[page]) {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "Views can be saved on the pages you can open: the queues, the reconciliation and the exceptions."))
		return
	}
	q, err := url.ParseQuery(r.PostForm.Get("query"))
	if err == nil {
		q = pageFilter(page, q)
		err = s.checkViewQuery(ctx, page, q)
	} else {
		err = ops.Errorf(ops.EINVALID, "The filter to save could not be read; open the page again and save from there.")
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	v, err := s.SavedViews.Save(ctx, desk.SavedView{Page: page, Name: r.PostForm.Get("name"),
		Query: viewQuery(page, q), Role: desk.Role(r.PostForm.Get("role"))}, u.Email)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	s.putFlash(ctx, flashMsg{Kind: "ok", Message: fmt.Sprintf("Saved the view %q for %s and above.", v.Name, v.Role)})
	http.Redirect(w, r, p.path+"?"+v.Query, http.StatusSeeOther)
}

func (s *Server) handleDeleteView(w http.ResponseWriter, r *http.Request) {
	if !s.formFor(w, r, s.SavedViews != nil) {
		return
	}
	id, err := pathID(r, "saved view")
	if err != nil {
		s.Error(w, r, err)
		return
	}
	u := userFrom(r.Context())
	v, err := s.SavedViews.Delete(r.Context(), id, u.Email, u.Role)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	s.putFlash(r.Context(), flashMsg{Kind: "ok", Message: fmt.Sprintf("Deleted the view %q.", v.Name)})
	http.Redirect(w, r, savedViewPaths[v.Page].path, http.StatusSeeOther)
}

// checkViewQuery refuses a filter its page would refuse, so a saved view never opens on an
// error page.
func (s *Server) checkViewQuery(ctx context.Context, page string, q url.Values) error {
	switch page {
	case desk.PageQueue:
		_, _, _, err := s.queueFilter(ctx, q)
		return err
	case desk.PageReconcile:
		_, err := s.parseReconQuery(ctx, q)
		return err
	default:
		_, _, err := parseExceptionsFilter(q)
		return err
	}
}

// pageFilter is the first non-empty value of each of page's filter keys in q.
func pageFilter(page string, q url.Values) url.Values {
	v := url.Values{}
	for _, k := range savedViewPaths[page].filters {
		if vs := q[k]; len(vs) > 0 && vs[0] != "" {
			v.Set(k, vs[0])
		}
	}
	return v
}

// viewQuery is page's filter in q, in a stable order.
func viewQuery(page string, q url.Values) string { return pageFilter(page, q).Encode() }

// savedViewsBar is the saved views of page for the signed-in person; count, when set, says
// how many rows a view's filter matches now.
func (s *Server) savedViewsBar(ctx context.Context, page string, current url.Values,
	count func(url.Values) (string, error)) (views.SavedViewsBar, error) {
	if s.SavedViews == nil {
		return views.SavedViewsBar{}, nil
	}
	u := userFrom(ctx)
	offered, err := s.SavedViews.Visible(ctx, page, u.Email, u.Role)
	if err != nil {
		return views.SavedViewsBar{}, err
	}
	here := viewQuery(page, current)
	b := views.SavedViewsBar{Page: page, Query: here, Hidden: offered.Hidden}
	least := desk.SavedViewPages[page]
	for _, r := range desk.Roles {
		if r.AtLeast(least) {
			b.Roles = append(b.Roles, views.Option{Value: string(r), Label: string(r), Selected: r == least})
		}
	}
	for _, v := range offered.Views {
		link := views.SavedViewLink{Name: v.Name, Role: string(v.Role), CreatedBy: v.CreatedBy}
		if v.CreatedBy == u.Email || u.Role.AtLeast(desk.RoleAdmin) {
			link.DeleteURL = "/views/" + strconv.FormatInt(v.ID, 10) + "/delete"
		}
		// A view kept from before filters were bounded is offered for deletion only; one
		// within the bound opens with its page's filter keys alone, as a view saved now would.
		q, err := url.ParseQuery(v.Query)
		if !v.Openable() || err != nil {
			b.Views = append(b.Views, link)
			continue
		}
		q = pageFilter(page, q)
		link.URL, link.Active = savedViewPaths[page].path+"?"+q.Encode(), q.Encode() == here
		if count != nil {
			if link.Count, err = count(q); err != nil {
				return b, err
			}
		}
		b.Views = append(b.Views, link)
	}
	return b, nil
}
