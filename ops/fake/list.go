package fake

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// rawJSON embeds stored JSON bytes in a rendered object without re-encoding them.
type rawJSON = json.RawMessage

// listItem is one candidate of a list endpoint. pos orders items by creation (larger is
// newer) and stays meaningful when filters hide the cursor object.
type listItem struct {
	id      string
	pos     int
	created int64
	render  func() any
}

// maxListLimit is the largest page a list endpoint gives.
const maxListLimit = 100

// listResponse pages items (newest first, filtered except for created[...]) the way
// Stripe's list endpoints do: limit 1..100 (default 10), cursors starting_after and
// ending_before naming an object id, has_more telling whether the travel direction has
// more.
func listResponse(req *apiRequest, url string, items []listItem, posOf func(id string) (int, bool), kind string) response {
	p := req.params
	limit := 10
	if v := p.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return invalid("parameter_invalid_integer", "limit",
				"Invalid integer: "+v+". The limit must be between 1 and 100.")
		}
		limit = n
	}
	created, resp, ok := createdFilter(p)
	if !ok {
		return resp
	}
	after, before := p.Get("starting_after"), p.Get("ending_before")
	if after != "" && before != "" {
		return invalid("", "ending_before",
			"You may only specify one of these parameters: starting_after, ending_before.")
	}

	kept := keep(items, func(it listItem) bool { return created(it.created) })
	page := kept
	switch {
	case after != "":
		cur, found := posOf(after)
		if !found {
			return notFound("starting_after", kind, after)
		}
		page = keep(kept, func(it listItem) bool { return it.pos < cur })
	case before != "":
		cur, found := posOf(before)
		if !found {
			return notFound("ending_before", kind, before)
		}
		page = keep(kept, func(it listItem) bool { return it.pos > cur })
	}
	hasMore := len(page) > limit
	switch {
	case hasMore && before != "":
		// The page is the run of items just newer than the cursor, still newest first.
		page = page[len(page)-limit:]
	case hasMore:
		page = page[:limit]
	}
	data := make([]any, len(page))
	for i, it := range page {
		data[i] = it.render()
	}
	return jsonResponse(http.StatusOK, obj{"object": "list", "data": data, "has_more": hasMore, "url": url})
}

// keep returns the items for which ok holds, in their order.
func keep(items []listItem, ok func(listItem) bool) []listItem {
	var out []listItem
	for _, it := range items {
		if ok(it) {
			out = append(out, it)
		}
	}
	return out
}

// createdFilter reads created=N and created[gt|gte|lt|lte]=N.
func createdFilter(p map[string][]string) (func(int64) bool, response, bool) {
	type bound struct {
		key string
		ok  func(v, b int64) bool
	}
	bounds := []bound{
		{"created", func(v, b int64) bool { return v == b }},
		{"created[gt]", func(v, b int64) bool { return v > b }},
		{"created[gte]", func(v, b int64) bool { return v >= b }},
		{"created[lt]", func(v, b int64) bool { return v < b }},
		{"created[lte]", func(v, b int64) bool { return v <= b }},
	}
	var checks []func(int64) bool
	for _, b := range bounds {
		vs := p[b.key]
		if len(vs) == 0 || vs[0] == "" {
			continue
		}
		n, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil {
			return nil, invalid("parameter_invalid_integer", b.key, "Invalid integer: "+vs[0]), false
		}
		ok := b.ok
		checks = append(checks, func(v int64) bool { return ok(v, n) })
	}
	return func(v int64) bool {
		for _, c := range checks {
			if !c(v) {
				return false
			}
		}
		return true
	}, response{}, true
}
