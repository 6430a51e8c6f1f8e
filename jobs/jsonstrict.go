package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// checkDuplicateKeys walks a JSON value that has already decoded cleanly
// (so it is well-formed and at most encoding/json's nesting depth deep) and
// refuses the first object member whose key appears twice in its object.
// encoding/json keeps the last of two equal keys silently, so a body could
// say one thing to a reader and another to edl.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are not parsed: 1e400 is not this walk's business
	type frame struct {
		obj     bool
		path    string
		keys    map[string]struct{}
		key     string // the member being read
		wantKey bool
		idx     int
	}
	var stack []*frame
	childPath := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.obj {
			return joinPath(top.path, top.key)
		}
		return fmt.Sprintf("%s[%d]", top.path, top.idx)
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		top := stack[len(stack)-1]
		if top.obj {
			top.wantKey = true
		} else {
			top.idx++
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // the decoder has already judged the syntax
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{obj: t == '{', path: childPath(), wantKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
				top := stack[n-1]
				if top.keys == nil {
					top.keys = map[string]struct{}{}
				}
				if _, dup := top.keys[t]; dup {
					return Invalid(joinPath(top.path, t), "duplicate key: each member may appear once")
				}
				top.keys[t] = struct{}{}
				top.key, top.wantKey = t, false
				continue
			}
			valueDone()
		default:
			valueDone()
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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		t    reflect.Type // nil: anything goes (interface, RawMessage, unknown)
		obj  bool
		path string
		key  string
		idx  int
		want bool // an object waiting for a key
	}
	var stack []*frame
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
			return ""
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				ct, p := child()
				stack = append(stack, &frame{t: container(ct), obj: v == '{', path: p, want: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].want {
				top := stack[n-1]
				top.key, top.want = v, false
				if v == key && top.t != nil && top.t.Kind() == reflect.Struct && !hasJSONField(top.t, v) {
					return joinPath(top.path, v)
				}
				continue
			}
			done()
		default:
			done()
		}
	}
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

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// memberType is the type of member key of an object of type t.
func memberType(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() == reflect.Struct:
		if f, ok := jsonField(t, key); ok {
			return f.Type
		}
	}
	return nil
}

func hasJSONField(t reflect.Type, key string) bool {
	_, ok := jsonField(t, key)
	return ok
}

// jsonField finds the field encoding/json decodes key into: by its name
// or json tag, exact first, then case-insensitively, through embedded
// structs.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	var fold *reflect.StructField
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
			return f, true
		}
		if fold == nil && strings.EqualFold(name, key) {
			fold = &f
		}
	}
	if fold != nil {
		return *fold, true
	}
	return reflect.StructField{}, false
}
