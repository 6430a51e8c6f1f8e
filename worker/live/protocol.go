package live

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/edl-nomad/edl/jobs"
)

// protocolJSON describes every message of the live protocol once, for
// both sides: this worker checks each request against it and shapes each
// reply with it (checkRequest, encodeReply); python/tests checks python/edl
// against the same file.
//
//go:embed protocol.json
var protocolJSON []byte

// protoField is a field's description: its type and whether a reply
// carries it even when zero ("int always").
type protoField struct {
	Type   string
	Always bool
}

func (f *protoField) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	words := strings.Fields(s)
	if len(words) == 0 || len(words) > 2 || (len(words) == 2 && words[1] != "always") {
		return fmt.Errorf("field type %q: want TYPE or \"TYPE always\"", s)
	}
	if !slices.Contains(protoTypes, words[0]) {
		return fmt.Errorf("field type %q: unknown (want one of %v)", words[0], protoTypes)
	}
	f.Type, f.Always = words[0], len(words) == 2
	return nil
}

var protoTypes = []string{"int", "number", "bool", "string", "bytes", "int[]", "string[]", "progress", "metrics", "nonfinite"}

// protoOp is one operation: its request's and its reply's fields.
type protoOp struct {
	Doc     string                `json:"doc"`
	Request map[string]protoField `json:"request"`
	Reply   map[string]protoField `json:"reply"`
}

// protocolSchema is protocol.json.
type protocolSchema struct {
	Version     int                   `json:"version"`
	ReplyCommon map[string]protoField `json:"reply_common"`
	Ops         map[string]protoOp    `json:"ops"`
}

// protocol is the embedded description; a bad one stops the binary at
// start (a test parses it too).
var protocol = mustProtocol(protocolJSON)

func mustProtocol(b []byte) *protocolSchema {
	p, err := parseProtocol(b)
	if err != nil {
		panic(err)
	}
	return p
}

func parseProtocol(b []byte) (*protocolSchema, error) {
	var p protocolSchema
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("live protocol.json: %w", err)
	}
	if len(p.Ops) == 0 {
		return nil, fmt.Errorf("live protocol.json: no ops")
	}
	return &p, nil
}

// checkRequest checks a request line against the op it names: a known
// op, only that op's fields, each of its type. The error names the field.
func (p *protocolSchema) checkRequest(line []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return err
	}
	var op string
	if err := json.Unmarshal(m["op"], &op); err != nil {
		return fmt.Errorf("op: not a string")
	}
	o, ok := p.Ops[op]
	if !ok {
		return fmt.Errorf("unknown op %q", op)
	}
	for k, v := range m {
		if k == "op" {
			continue
		}
		f, ok := o.Request[k]
		if !ok {
			return fmt.Errorf("%s: unknown field %q", op, k)
		}
		if err := checkType(f.Type, v); err != nil {
			return fmt.Errorf("%s: field %q: %w", op, k, err)
		}
	}
	return nil
}

// checkType checks one JSON value against a field type of protocol.json
// (null stands for the zero value of any type).
func checkType(typ string, v json.RawMessage) error {
	if string(v) == "null" {
		return nil
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return err
	}
	ok := false
	switch typ {
	case "int":
		n, isNum := x.(float64)
		ok = isNum && n == math.Trunc(n)
	case "number":
		_, ok = x.(float64)
	case "bool":
		_, ok = x.(bool)
	case "string", "bytes":
		_, ok = x.(string)
	case "progress":
		_, ok = x.(map[string]any)
	case "metrics":
		m, isObj := x.(map[string]any)
		ok = isObj
		for _, e := range m {
			_, isNum := e.(float64)
			ok = ok && isNum
		}
	case "nonfinite":
		m, isObj := x.(map[string]any)
		ok = isObj
		for _, e := range m {
			name, isStr := e.(string)
			_, err := jobs.ParseNonFinite(name)
			ok = ok && isStr && err == nil
		}
	case "int[]", "string[]":
		a, isArr := x.([]any)
		ok = isArr
		for _, e := range a {
			if typ == "int[]" {
				n, isNum := e.(float64)
				ok = ok && isNum && n == math.Trunc(n)
			} else {
				_, isStr := e.(string)
				ok = ok && isStr
			}
		}
	}
	if !ok {
		return fmt.Errorf("%s is not of type %s", truncate(v, 40), typ)
	}
	return nil
}

// encodeReply is the reply to op as one JSON line's object: rep's fields
// that op's reply has (and the common ones: error), no others.
func (p *protocolSchema) encodeReply(op string, rep liveReply) ([]byte, error) {
	b, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	o, ok := p.Ops[op]
	if !ok {
		// Not a request of the protocol (checkRequest refused it): the
		// error alone.
		return json.Marshal(map[string]string{"error": rep.Error})
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k := range m {
		_, inOp := o.Reply[k]
		_, common := p.ReplyCommon[k]
		if !inOp && !common {
			delete(m, k)
		}
	}
	return json.Marshal(m)
}
