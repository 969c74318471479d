package ops

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// JSONNameProblem is a key of a JSON object that encoding/json would read other than every
// other reader does: one that differs from a field's JSON name only in case (encoding/json
// matches names case-insensitively, with Unicode folding, so "AMOUNT_CENTS" and
// "amount_centſ" both fill amount_cents), or one given twice in the same object (the last
// would win). A gateway, a log or a person approving a request sees one value where Settle
// would act on another, so such a body is refused rather than read (rule 12).
type JSONNameProblem struct {
	// Key is the key as sent (decoded), and Path where it is: "document.TEXT".
	Key, Path string
	// Field is the path of the field Key would be read as ("document.text"); when Repeated
	// it is Path.
	Field string
	// Repeated is true for a key given twice in one object.
	Repeated bool
}

// maxNameDepth bounds how deep FindJSONNameProblem looks; encoding/json refuses deeper
// bodies itself, so nothing past it is read.
const maxNameDepth = 10000

// FindJSONNameProblem returns the first key of raw that is not a field's exact JSON name of
// v's type while differing from one only in case, or that repeats a key of its object, at
// any depth. A body that is not valid JSON yields nil: decoding refuses it.
func FindJSONNameProblem(raw []byte, v any) *JSONNameProblem {
	dec := json.NewDecoder(bytes.NewReader(raw))
	p, _ := walkNames(dec, reflect.TypeOf(v), "", 0)
	return p
}

// walkNames reads one JSON value from dec, whose Go type is t (nil when it is not known, as
// for an interface or json.RawMessage: then only repeats are looked for).
func walkNames(dec *json.Decoder, t reflect.Type, path string, depth int) (*JSONNameProblem, error) {
	if depth > maxNameDepth {
		return nil, errStop
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	t = indirect(t)
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, t, path, depth)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if p, err := walkNames(dec, elem, path, depth+1); p != nil || err != nil {
				return p, err
			}
		}
		_, err = dec.Token()
		return nil, err
	}
	return nil, nil
}

// walkObject reads the rest of an object whose '{' was read.
func walkObject(dec *json.Decoder, t reflect.Type, path string, depth int) (*JSONNameProblem, error) {
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = jsonFields(t, map[string]reflect.Type{})
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, errStop
		}
		at := joinPath(path, key)
		if seen[key] {
			return &JSONNameProblem{Key: key, Path: at, Field: at, Repeated: true}, nil
		}
		seen[key] = true
		child := elem
		if fields != nil {
			ft, exact := fields[key]
			if name := foldMatch(fields, key); !exact && name != "" {
				return &JSONNameProblem{Key: key, Path: at, Field: joinPath(path, name)}, nil
			}
			child = ft
		}
		if p, err := walkNames(dec, child, at, depth+1); p != nil || err != nil {
			return p, err
		}
	}
	_, err := dec.Token()
	return nil, err
}

// errStop ends a walk of a body that decoding refuses anyway (nested too deeply, not JSON).
var errStop = &Error{Code: EINVALID, Message: "The body cannot be read."}

// foldMatch is the field name that key would fill other than exactly, or "".
func foldMatch(fields map[string]reflect.Type, key string) string {
	for name := range fields {
		if name != key && strings.EqualFold(name, key) {
			return name
		}
	}
	return ""
}

// jsonFields adds the JSON names of struct t's fields to into, each with its type, as
// encoding/json sees them: a tag's name or else the Go name, "-" left out, and the fields of
// an untagged embedded struct promoted.
func jsonFields(t reflect.Type, into map[string]reflect.Type) map[string]reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && indirect(f.Type).Kind() == reflect.Struct {
			jsonFields(indirect(f.Type), into)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		into[name] = f.Type
	}
	return into
}

// indirect is t without its pointers.
func indirect(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// joinPath names key inside the object at path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// maxKeyShown bounds how much of a refused key a refusal repeats: a key is the sender's text,
// and a refusal should name it, not echo a payload.
const maxKeyShown = 64

// ShownKey is a refused key, or its path, cut to what a refusal repeats.
func ShownKey(k string) string {
	if r := []rune(k); len(r) > maxKeyShown {
		return string(r[:maxKeyShown]) + "…"
	}
	return k
}
