package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
