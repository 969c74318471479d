package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/settle-dev/settle/ops"
)

// The provider's account is shared by every tenant, and a request may name an object the
// provider holds by its id: a file (file_id), a vector store to search (vector_store_ids), a
// code sandbox (a container id), a stored prompt template (prompt), an audio answer kept for
// the next turn (audio.id), an item of a stored response (item_reference, an item's id). The
// provider reads whatever the id names, another tenant's among them. Settle serves no files,
// vector stores, containers or prompts, so none of those is any tenant's own as far as
// Settle knows (ops rule 12), and a request naming one is refused before anything is sent.
// An item of a stored response is taken only when it is an output item of one of the
// tenant's own responses through Settle (ResponseItems); another tenant's and an unknown one
// are refused alike, so the answer does not tell that the id exists. A file id inside such an
// output item, handed back by its tenant, is the provider's citation in that tenant's own
// answer: it is taken when the item as Settle kept it holds the same file id, and refused
// as any other file id otherwise, so no client edits another's file into its own item.

// ResponseItems finds which items of the provider's stored responses are a tenant's own:
// ops/pg implements it, and the gateway reads it through Config.Refs.
type ResponseItems interface {
	// ResponseOutputItems returns those of ids that are output items of a response one of
	// tenantID's calls through Settle created and whose answer Settle keeps.
	ResponseOutputItems(ctx context.Context, tenantID int64, ids []string) ([]string, error)
	// KeptOutputItems returns, by id, those of ids that are such output items as the kept
	// answers hold them, one for each answer that holds the id.
	KeptOutputItems(ctx context.Context, tenantID int64, ids []string) (map[string][]json.RawMessage, error)
}

// objectRefusal is the refusal of a request that names a provider's object by id.
func objectRefusal(format string, args ...any) error {
	return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// maxPath bounds a path a refusal names: its keys are the client's, of any length.
const maxPath = 200

// clip is path cut to maxPath bytes, on a character's boundary.
func clip(path string) string {
	if len(path) <= maxPath {
		return path
	}
	cut := maxPath
	for cut > 0 && !utf8.RuneStart(path[cut]) {
		cut--
	}
	return path[:cut] + "…"
}

// fileRefusal refuses a file named by id at path.
func fileRefusal(path string) error {
	return objectRefusal("%s names a file of the provider's account by id, and no file is uploaded through Settle, so none is this tenant's own: send the file's content in the request instead.", clip(path))
}

// objectFields are the fields, by route, where a request may name an object of the
// provider's account.
var objectFields = map[string][]string{
	chatRoute:      {"messages"},
	responsesRoute: {"input", "tools", "prompt", "conversation", "previous_response_id"},
	MessagesRoute:  {"system", "messages", "container"},
}

// checkProviderObjects refuses a request (body) that names an object of the provider's
// account that is not the tenant's own (see above), a previous response or conversation among
// them (checkStoredContext), or that gives one of the fields naming them twice. Any other
// error (the database could not be asked) is returned as it is.
func (x *exchange) checkProviderObjects(body []byte) error {
	if err := topLevelTwice(body, objectFields[x.api.route()]); err != nil {
		return err
	}
	if err := x.checkStoredContext(); err != nil {
		return err
	}
	f := x.req.fields
	switch x.api.route() {
	case chatRoute:
		return checkChatObjects(f["messages"])
	case responsesRoute:
		if err := checkResponsesTools(f); err != nil {
			return err
		}
		return x.checkResponsesInput(f["input"])
	case MessagesRoute:
		return checkMessagesObjects(f)
	}
	return nil
}

// mayName reports whether raw may hold one of keys, escaped or not: most requests name no
// object, and this keeps them from being decoded a second time.
func mayName(raw json.RawMessage, keys ...string) bool {
	if asciiEscaped(raw) {
		return true
	}
	for _, k := range keys {
		if bytes.Contains(raw, []byte(k)) {
			return true
		}
	}
	return false
}

// asciiEscaped reports whether raw holds a \u escape of an ASCII character (\u0020 to
// \u007f), the only escape that could spell a key's letters. Text escaped as clients that
// write only ASCII do (é as \u00e9, any other script above it) is not one, so such a
// request is not decoded again for it.
func asciiEscaped(raw []byte) bool {
	for {
		i := bytes.Index(raw, []byte(`\u00`))
		if i < 0 || i+4 >= len(raw) {
			return false
		}
		if c := raw[i+4]; c >= '2' && c <= '7' {
			return true
		}
		raw = raw[i+4:]
	}
}

// decode decodes raw, the value at path, into a generic value; a value that does not decode
// names nothing and is left to the provider to refuse (nil, nil). A key given twice in one
// object is refused: Settle reads its last value, and a provider that read the first would
// be sent what Settle never checked.
func decode(raw json.RawMessage, path string) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	v, err := strictValue(dec, path)
	var twice *givenTwice
	if errors.As(err, &twice) {
		return nil, objectRefusal("%s is given twice: send each field once.", clip(twice.path))
	}
	if err != nil {
		return nil, nil
	}
	return v, nil
}

// givenTwice is a key an object gives twice, at path.
type givenTwice struct{ path string }

func (g *givenTwice) Error() string { return g.path + " is given twice" }

// strictValue reads the next JSON value of dec as json.Unmarshal does into an any, but fails
// with givenTwice on an object that gives a key twice.
func strictValue(dec *json.Decoder, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		list := []any{}
		for i := 0; dec.More(); i++ {
			v, err := strictValue(dec, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			if _, ok := obj[key]; ok {
				return nil, &givenTwice{path + "." + key}
			}
			if obj[key], err = strictValue(dec, path+"."+key); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token()
		return obj, err
	}
	return tok, nil
}

// topLevelTwice refuses a body that gives one of its fields twice, when it may give one of
// names twice (or spell one with an escape): Settle checks the last value of a field, and a
// provider that read the first would be sent what Settle never checked. Most bodies give
// none of them twice and are not read again.
func topLevelTwice(body []byte, names []string) error {
	twice := asciiEscaped(body)
	for _, n := range names {
		twice = twice || bytes.Count(body, []byte(`"`+n+`"`)) > 1
	}
	if !twice {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := dec.Token()
		key, _ := k.(string)
		var skip json.RawMessage
		if err != nil || dec.Decode(&skip) != nil {
			return nil
		}
		if seen[key] {
			return objectRefusal("%s is given twice: send each field once.", clip(key))
		}
		seen[key] = true
	}
	return nil
}

// fileRef returns the path, under path, of the first file v names by id: a string file_id,
// or a non-empty file_ids list. The values of keys in skip (a tool call's own arguments, a
// function's schema) are the client's own data and are not read.
func fileRef(v any, path string, skip map[string]bool) string {
	switch t := v.(type) {
	case map[string]any:
		if id, ok := t["file_id"].(string); ok && id != "" {
			return path + ".file_id"
		}
		if ids, ok := t["file_ids"].([]any); ok && len(ids) > 0 {
			return path + ".file_ids"
		}
		for k, e := range t {
			if skip[k] {
				continue
			}
			if p := fileRef(e, path+"."+k, skip); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range t {
			if p := fileRef(e, path+"["+strconv.Itoa(i)+"]", skip); p != "" {
				return p
			}
		}
	}
	return ""
}

// checkChatObjects refuses chat completion messages that name a file by id, or an audio
// answer of an earlier turn by its id: the provider keeps that audio under its id for a
// while, and Settle cannot tell whose it is. It is the gateway's busiest route, so messages
// that cannot name either are not decoded again.
func checkChatObjects(messages json.RawMessage) error {
	if !mayName(messages, `file_id`, `audio`) {
		return nil
	}
	v, err := decode(messages, "messages")
	if err != nil || v == nil {
		return err
	}
	if p := fileRef(v, "messages", nil); p != "" {
		return fileRefusal(p)
	}
	list, _ := v.([]any)
	for i, m := range list {
		msg, _ := m.(map[string]any)
		if audio, ok := msg["audio"].(map[string]any); ok && audio["id"] != nil {
			return objectRefusal("messages[%d].audio.id names an audio answer the provider keeps by id, which Settle cannot tell as this tenant's own: send the assistant's words as its content instead.", i)
		}
	}
	return nil
}

// checkResponsesTools refuses a stored prompt template and tools that would read an object
// of the provider's account: a file_search over vector stores, a code_interpreter in an
// existing container or with files by id, an image_generation mask given by file id. A
// prompt template lives in the account, where Settle cannot tell whose it is, and it may
// carry instructions, files and vector stores of its own.
func checkResponsesTools(f map[string]json.RawMessage) error {
	if raw, ok := f["prompt"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return objectRefusal("prompt names a prompt template stored in the provider's account, which Settle serves no route for and cannot tell as this tenant's own (a template may carry its own instructions, files and vector stores): send the instructions and input themselves.")
	}
	v, err := decode(f["tools"], "tools")
	if err != nil {
		return err
	}
	tools, _ := v.([]any)
	for i, e := range tools {
		tool, _ := e.(map[string]any)
		path := "tools[" + strconv.Itoa(i) + "]"
		if ids, ok := tool["vector_store_ids"].([]any); ok && len(ids) > 0 {
			return objectRefusal("%s.vector_store_ids names vector stores of the provider's account, and none is created through Settle, so none is this tenant's own: file_search cannot search them through Settle.", path)
		}
		if c, ok := tool["container"].(string); ok && c != "" {
			return objectRefusal(`%s.container names a container of the provider's account by id, and none is created through Settle, so none is this tenant's own: ask for a new one with {"type":"auto"}.`, path)
		}
		if p := fileRef(tool, path, map[string]bool{"parameters": true}); p != "" {
			return fileRefusal(p)
		}
	}
	return nil
}

// itemRef is an item of a stored response that a Responses call names, and where.
type itemRef struct{ path, id string }

// checkResponsesInput refuses input that names a file by id, or an item of a stored response
// that is not an output item of one of the tenant's own responses. A file id inside an
// output item the client hands back is taken when that item is the tenant's own and the
// answer Settle keeps holds the same file id in it: the provider wrote it there (a citation
// of a file its code_interpreter made), so it names nothing of another tenant's.
func (x *exchange) checkResponsesInput(input json.RawMessage) error {
	if !mayName(input, `id"`, `file_ids`) {
		return nil
	}
	v, err := decode(input, "input")
	if err != nil || v == nil {
		return err
	}
	items, isList := v.([]any)
	if !isList {
		if p := fileRef(v, "input", nil); p != "" {
			return fileRefusal(p)
		}
		return nil
	}
	cited, err := handedBackFiles(items)
	if err != nil {
		return err
	}
	if err := x.checkItemRefs(itemRefs(items)); err != nil {
		return err
	}
	return x.checkHandedBackFiles(cited)
}

// checkMessagesObjects refuses a Messages API request that names a file of Anthropic's Files
// API (a document, image or container_upload source, any content block's file_id), an
// existing code execution container, or a custom skill of the account for the container.
// The input of a tool call is the client's own data and is not read.
func checkMessagesObjects(f map[string]json.RawMessage) error {
	skip := map[string]bool{"input": true}
	for _, name := range []string{"system", "messages"} {
		if !mayName(f[name], `file_id`) {
			continue
		}
		v, err := decode(f[name], name)
		if err != nil {
			return err
		}
		if p := fileRef(v, name, skip); p != "" {
			return fileRefusal(p)
		}
	}
	v, err := decode(f["container"], "container")
	if err != nil {
		return err
	}
	switch c := v.(type) {
	case string:
		return objectRefusal("container names a code execution container of the provider's account by id, and none is created through Settle, so none is this tenant's own: leave container out to have a new one.")
	case map[string]any:
		if c["id"] != nil {
			return objectRefusal("container.id names a code execution container of the provider's account, and none is created through Settle, so none is this tenant's own: leave the id out to have a new one.")
		}
		skills, _ := c["skills"].([]any)
		for i, s := range skills {
			if skill, _ := s.(map[string]any); skill["type"] != "anthropic" {
				return objectRefusal("container.skills[%d] names a skill of the provider's account, and none is uploaded through Settle, so none is this tenant's own: only Anthropic's own skills (type anthropic) can be used through Settle.", i)
			}
		}
	}
	return nil
}
