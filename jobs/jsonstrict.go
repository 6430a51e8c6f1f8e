package jobs

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"
)

// checkKeys walks a JSON value that has already decoded cleanly into a
// value of type t (so it is well-formed and at most encoding/json's nesting
// depth deep) and refuses the first object member whose key appears twice
// in its object, or that names a field of t only by a different case.
// encoding/json keeps the last of two equal keys silently and matches
// field names case-insensitively, so a body could say one thing to a reader
// ("Name" and "name" both given) and another to edl.
func checkKeys(data []byte, t reflect.Type) error {
	return walkKeys(data, t, func(f *keyFrame, key string) error {
		if _, dup := f.seen[key]; dup {
			return Invalid(joinPath(f.path, key), "duplicate key: each member may appear once")
		}
		if f.seen == nil {
			f.seen = map[string]struct{}{}
		}
		f.seen[key] = struct{}{}
		if f.t != nil && f.t.Kind() == reflect.Struct {
			if _, name, ok := jsonField(f.t, key); ok && name != key {
				return Invalid(joinPath(f.path, key), fmt.Sprintf("%s: names are case-sensitive (did you mean %q?)", reasonUnknownField, name))
			}
		}
		return nil
	})
}

// keyFrame is an object or array being walked by walkKeys.
type keyFrame struct {
	t    reflect.Type // nil: anything goes (interface, RawMessage, unknown)
	obj  bool
	path string // "" is the top-level value
	key  string // the member being read
	idx  int    // the element being read
	want bool   // an object waiting for a key
	seen map[string]struct{}
}

// walkKeys walks well-formed data beside the Go type t and calls member
// with each object member's key, in order, and the frame of its object
// (its type, path and what member stored in it). The first error member
// returns ends the walk; a token the decoder cannot read ends it quietly
// (the decode before judged the syntax).
func walkKeys(data []byte, t reflect.Type, member func(f *keyFrame, key string) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are not parsed: 1e400 is not this walk's business
	var stack []*keyFrame
	child := func() (reflect.Type, string) {
		if len(stack) == 0 {
			return t, ""
		}
		top := stack[len(stack)-1]
		if top.obj {
			return memberType(top.t, top.key), joinPath(top.path, top.key)
		}
		var et reflect.Type
		if top.t != nil {
			et = top.t.Elem()
		}
		return et, fmt.Sprintf("%s[%d]", top.path, top.idx)
	}
	done := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].want = true
			} else {
				stack[n-1].idx++
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				ct, p := child()
				stack = append(stack, &keyFrame{t: container(ct), obj: v == '{', path: p, want: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].want {
				top := stack[n-1]
				if err := member(top, v); err != nil {
					return err
				}
				top.key, top.want = v, false
				continue
			}
			done()
		default:
			done()
		}
	}
}

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// objectMembers reads one JSON object's members without decoding their
// values (each stays raw), refusing a key given twice. It is the cheap first
// look a merge patch gets: a caller can refuse members by name before any
// value is decoded or merged. path names the object in errors ("" is the
// body). A value that is not an object is a *ValidationError on path.
func objectMembers(data []byte, path string) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, decodeErr(err, dec.InputOffset())
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		field := path
		if field == "" {
			field = "(body)"
		}
		return nil, nil, Invalid(field, "must be a JSON object")
	}
	var keys []string
	members := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, decodeErr(err, dec.InputOffset())
		}
		key, _ := tok.(string)
		if _, dup := members[key]; dup {
			return nil, nil, Invalid(joinPath(path, key), "duplicate key: each member may appear once")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, decodeErr(err, dec.InputOffset())
		}
		keys = append(keys, key)
		members[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, decodeErr(err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, &DecodeError{Offset: dec.InputOffset(), Msg: "trailing data after the JSON value"}
	}
	return keys, members, nil
}

const reasonUnknownField = "unknown field"

// unknownFieldPath finds the path of the first member named key (as
// encoding/json reports an unknown field: by its key alone) that no field
// of the Go type at its place takes, walking data (well-formed) beside t.
// "" when none is found.
func unknownFieldPath(data []byte, t reflect.Type, key string) string {
	var path string
	found := errors.New("found")
	_ = walkKeys(data, t, func(f *keyFrame, k string) error {
		if k == key && f.t != nil && f.t.Kind() == reflect.Struct && !hasJSONField(f.t, k) {
			path = joinPath(f.path, k)
			return found
		}
		return nil
	})
	return path
}

// container dereferences pointers; a type that is not a struct, map, slice
// or array (an interface, json.RawMessage, a Unmarshaler) is nil: its
// content is not this walk's business.
func container(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		return t
	}
	return nil
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// memberType is the type of member key of an object of type t.
func memberType(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() == reflect.Struct:
		if f, _, ok := jsonField(t, key); ok {
			return f.Type
		}
	}
	return nil
}

func hasJSONField(t reflect.Type, key string) bool {
	_, _, ok := jsonField(t, key)
	return ok
}

// jsonField finds the field encoding/json decodes key into: by its name
// or json tag, exact first, then case-insensitively, through embedded
// structs. name is the field's JSON name (key itself on an exact match).
func jsonField(t reflect.Type, key string) (f reflect.StructField, name string, ok bool) {
	var fold *reflect.StructField
	foldName := ""
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			continue // its fields are visible themselves
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f, name, true
		}
		if fold == nil && strings.EqualFold(name, key) {
			fold, foldName = &f, name
		}
	}
	if fold != nil {
		return *fold, foldName, true
	}
	return reflect.StructField{}, "", false
}

var timeType = reflect.TypeFor[time.Time]()

// refusedValue finds the first value of well-formed data (decoded beside
// the Go type t, path naming data) that its type's own decoder refuses (a
// json.Unmarshaler or encoding.TextUnmarshaler: time.Time), and why; ""
// when none does. encoding/json reports such an error without the field it
// was decoding.
func refusedValue(data []byte, t reflect.Type, path string) (string, string) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return "", ""
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType) {
		if err := json.Unmarshal(data, reflect.New(t).Interface()); err != nil {
			if path == "" {
				path = "(body)"
			}
			if t == timeType {
				return path, "must be an RFC 3339 time such as 2026-12-02T06:00:00Z"
			}
			return path, err.Error()
		}
		return "", ""
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil {
			return "", ""
		}
		keys := make([]string, 0, len(members))
		for k := range members {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p, why := refusedValue(members[k], memberType(t, k), joinPath(path, k)); p != "" {
				return p, why
			}
		}
	case reflect.Slice, reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			return "", ""
		}
		for i, e := range elems {
			if p, why := refusedValue(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p, why
			}
		}
	}
	return "", ""
}
