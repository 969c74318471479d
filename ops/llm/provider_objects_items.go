package llm

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/settle-dev/settle/ops"
)

// The items of stored responses a Responses call names, and the file ids inside the output
// items a client hands back: see the comment at the top of provider_objects.go.

// itemFile is a file id that an output item handed back holds, and where.
type itemFile struct{ path, item, id string }

// handedBackFiles lists the file ids of the output items that input hands back with their
// id and content, for checkHandedBackFiles to compare with the items Settle kept, and
// refuses a file id anywhere else.
func handedBackFiles(items []any) ([]itemFile, error) {
	var cited []itemFile
	for i, e := range items {
		path := "input[" + strconv.Itoa(i) + "]"
		item, _ := e.(map[string]any)
		id, hasID := item["id"].(string)
		if !hasID || item["type"] == "item_reference" || item["type"] == nil && item["role"] == nil {
			if p := fileRef(e, path, nil); p != "" {
				return nil, fileRefusal(p)
			}
			continue
		}
		for _, f := range fileIDs(item, path, nil) {
			cited = append(cited, itemFile{path: f.path, item: id, id: f.id})
		}
	}
	return cited, nil
}

// fileIDs lists every file id v holds under path, as fileRef finds the first: a string
// file_id, and each entry of a file_ids list (an entry that is no string as an empty id,
// which no kept item holds).
func fileIDs(v any, path string, out []itemFile) []itemFile {
	switch t := v.(type) {
	case map[string]any:
		if id, ok := t["file_id"].(string); ok && id != "" {
			out = append(out, itemFile{path: path + ".file_id", id: id})
		}
		if ids, ok := t["file_ids"].([]any); ok {
			for i, e := range ids {
				id, _ := e.(string)
				out = append(out, itemFile{path: path + ".file_ids[" + strconv.Itoa(i) + "]", id: id})
			}
		}
		// Every key is walked, the two above too: a string adds nothing there, and an
		// object given for one may hold a file id of its own, as fileRef finds it.
		for k, e := range t {
			out = fileIDs(e, path+"."+k, out)
		}
	case []any:
		for i, e := range t {
			out = fileIDs(e, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
	return out
}

// checkHandedBackFiles takes the file ids of output items handed back (checkItemRefs found
// them the tenant's own) only when the kept item of the same id holds each of them; the
// first it does not hold is refused as any file id is, so a client cannot edit another
// tenant's file into its own item.
func (x *exchange) checkHandedBackFiles(cited []itemFile) error {
	if len(cited) == 0 {
		return nil
	}
	ids := make([]string, 0, len(cited))
	for _, f := range cited {
		ids = append(ids, f.item)
	}
	var kept map[string][]json.RawMessage
	if items, ok := x.g.cfg.Refs.(ResponseItems); ok {
		var err error
		if kept, err = items.KeptOutputItems(x.ctx, x.tenant.ID, ids); err != nil {
			return fmt.Errorf("read the output items handed back: %w", err)
		}
	}
	holds := map[[2]string]bool{}
	for item, copies := range kept {
		for _, raw := range copies {
			v, _ := decode(raw, "")
			for _, f := range fileIDs(v, "", nil) {
				holds[[2]string{item, f.id}] = true
			}
		}
	}
	for _, f := range cited {
		if f.id == "" || !holds[[2]string{f.item, f.id}] {
			return fileRefusal(f.path)
		}
	}
	return nil
}

// itemRefs lists the items of stored responses that input items name: an item_reference, an
// item given with its id (the provider reads the stored item of that id), and the MCP
// approval request an approval answers.
func itemRefs(items []any) []itemRef {
	var refs []itemRef
	for i, e := range items {
		item, _ := e.(map[string]any)
		path := "input[" + strconv.Itoa(i) + "]"
		if id, ok := item["id"].(string); ok {
			// An item_reference may leave its type out (the SDKs do): an id alone.
			if item["type"] == "item_reference" || item["type"] == nil && item["role"] == nil {
				refs = append(refs, itemRef{path + " (item_reference) id", id})
			} else {
				refs = append(refs, itemRef{path + ".id", id})
			}
		}
		if id, ok := item["approval_request_id"].(string); ok {
			refs = append(refs, itemRef{path + ".approval_request_id", id})
		}
	}
	return refs
}

// checkItemRefs takes refs only when every one is an output item of one of the tenant's own
// responses; the first that is not is refused, another tenant's as an unknown one.
func (x *exchange) checkItemRefs(refs []itemRef) error {
	if len(refs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		if len(r.id) > ops.MaxRefBytes {
			return objectRefusal("%s is over %d bytes: Settle takes no longer item id.", r.path, ops.MaxRefBytes)
		}
		ids = append(ids, r.id)
	}
	var found []string
	if items, ok := x.g.cfg.Refs.(ResponseItems); ok {
		var err error
		if found, err = items.ResponseOutputItems(x.ctx, x.tenant.ID, ids); err != nil {
			return fmt.Errorf("check the items a response names: %w", err)
		}
	}
	own := make(map[string]bool, len(found))
	for _, id := range found {
		own[id] = true
	}
	for _, r := range refs {
		if !own[r.id] {
			return objectRefusal("%s %q names no output item of a response created through Settle with this tenant's tokens whose answer Settle keeps: send the item's content instead.", r.path, r.id)
		}
	}
	return nil
}
