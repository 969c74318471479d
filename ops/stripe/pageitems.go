package stripe

import (
	"encoding/json"

	stripego "github.com/stripe/stripe-go/v76"
)

// pageItems hands on the items of a listing's pages as Stripe wrote them, one at a time in
// the order the iterator visits them: the evidence keeps Stripe's own bytes, and a million
// refunds are neither encoded again nor decoded a second time.
type pageItems struct {
	page  *stripego.RefundList
	items []json.RawMessage
}

// next returns the next item of page, splitting the page's body when the iterator has moved
// to a new one; nil when the body cannot be split.
func (p *pageItems) next(page *stripego.RefundList) json.RawMessage {
	if page != p.page {
		p.page, p.items = page, nil
		if page != nil && page.LastResponse != nil {
			p.items = dataItems(page.LastResponse.RawJSON)
		}
	}
	if len(p.items) == 0 {
		return nil
	}
	item := p.items[0]
	p.items = p.items[1:]
	return item
}

// dataItems returns the objects of a list body's top-level "data" array as written, by
// following strings and nesting only; nil when the body has no such array. stripe-go has
// decoded and checked the same body already, and each item is matched to its decoded refund
// by id before it is used.
func dataItems(body []byte) []json.RawMessage {
	var items []json.RawMessage
	depth, start, inData := 0, -1, false
	var last []byte // the latest string at the top level: the key of the value that follows
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '"':
			end := stringEnd(body, i)
			if end < 0 {
				return nil
			}
			if depth == 1 {
				last = body[i+1 : end]
			}
			i = end
		case '{', '[':
			switch {
			case depth == 1 && c == '[' && string(last) == "data":
				inData = true
			case inData && depth == 2 && c == '{':
				start = i
			}
			depth++
		case '}', ']':
			depth--
			switch {
			case inData && depth == 2 && start >= 0:
				items, start = append(items, body[start:i+1]), -1
			case inData && depth == 1:
				return items
			}
		}
	}
	return nil
}

// stringEnd is the index of the quote closing the JSON string opening at body[i], or -1.
func stringEnd(body []byte, i int) int {
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}
