package live

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/worker/core"
)

// goFields are the JSON fields of a message struct (embedded structs
// flattened): name -> type and whether it is sent when zero.
func goFields(t *testing.T, typ reflect.Type) map[string]protoField {
	t.Helper()
	out := map[string]protoField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			for k, v := range goFields(t, f.Type) {
				out[k] = v
			}
			continue
		}
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		out[name] = protoField{Type: protoTypeOf(t, f.Type), Always: !strings.Contains(opts, "omitempty")}
	}
	return out
}

// protoTypeOf is the protocol.json type of a Go field type.
func protoTypeOf(t *testing.T, typ reflect.Type) string {
	t.Helper()
	switch {
	case typ == reflect.TypeFor[[]byte]():
		return "bytes"
	case typ == reflect.TypeFor[*core.ProgressState]():
		return "progress"
	case typ == reflect.TypeFor[map[string]float64]():
		return "metrics"
	case typ == reflect.TypeFor[map[string]string]():
		return "nonfinite"
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Int64:
		return "int[]"
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.String:
		return "string[]"
	}
	switch typ.Kind() {
	case reflect.Int, reflect.Int64:
		return "int"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	}
	t.Fatalf("Go type %s has no protocol.json type", typ)
	return ""
}

// TestProtocolMatchesTheGoMessages: every field the worker reads from a
// request or writes in a reply is in protocol.json with its type, and
// every field protocol.json names is one the worker has: a field added on
// one side only fails here.
func TestProtocolMatchesTheGoMessages(t *testing.T) {
	p, err := parseProtocol(protocolJSON)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, goSide map[string]protoField, schema func(yield func(op, name string, f protoField))) {
		seen := map[string]bool{}
		schema(func(op, name string, f protoField) {
			seen[name] = true
			g, ok := goSide[name]
			switch {
			case !ok:
				t.Errorf("%s %s: field %q is in protocol.json, not in the Go message", op, what, name)
			case g.Type != f.Type:
				t.Errorf("%s %s: field %q: protocol.json says %s, Go has %s", op, what, name, f.Type, g.Type)
			case what == "reply" && g.Always != f.Always:
				t.Errorf("%s reply: field %q: protocol.json says always=%v, Go's omitempty says %v", op, name, f.Always, g.Always)
			}
		})
		for name := range goSide {
			if !seen[name] {
				t.Errorf("%s field %q of the Go message is in no op of protocol.json", what, name)
			}
		}
	}
	req := goFields(t, reflect.TypeFor[liveRequest]())
	delete(req, "op")
	check("request", req, func(yield func(op, name string, f protoField)) {
		for op, o := range p.Ops {
			for name, f := range o.Request {
				yield(op, name, f)
			}
		}
	})
	check("reply", goFields(t, reflect.TypeFor[liveReply]()), func(yield func(op, name string, f protoField)) {
		for name, f := range p.ReplyCommon {
			yield("every", name, f)
		}
		for op, o := range p.Ops {
			for name, f := range o.Reply {
				yield(op, name, f)
			}
		}
	})
}

// handledOps are the ops the worker's code dispatches on: the string
// cases of its switches on the op and its comparisons with it.
func handledOps(t *testing.T) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	ops := map[string]bool{}
	isOp := func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name == "op"
		case *ast.SelectorExpr:
			return e.Sel.Name == "Op"
		}
		return false
	}
	lit := func(e ast.Expr) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			s, _ := strconv.Unquote(b.Value)
			ops[s] = true
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SwitchStmt:
				if n.Tag != nil && isOp(n.Tag) {
					for _, c := range n.Body.List {
						for _, e := range c.(*ast.CaseClause).List {
							lit(e)
						}
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && isOp(n.X) {
					lit(n.Y)
				}
			}
			return true
		})
	}
	return ops
}

// TestProtocolEveryOpHandled: every op of protocol.json is one the worker
// dispatches on, and the worker dispatches on no op protocol.json lacks.
func TestProtocolEveryOpHandled(t *testing.T) {
	handled := handledOps(t)
	var missing, extra []string
	for op := range protocol.Ops {
		if !handled[op] {
			missing = append(missing, op)
		}
	}
	for op := range handled {
		if _, ok := protocol.Ops[op]; !ok {
			extra = append(extra, op)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("ops in protocol.json the worker does not handle: %v; ops the worker handles that protocol.json lacks: %v", missing, extra)
	}
	if len(handled) < 10 {
		t.Fatalf("found only %d handled ops (%v): the scan is broken", len(handled), handled)
	}
}

func TestProtocolCheckRequest(t *testing.T) {
	tests := []struct{ line, err string }{
		{`{"op":"hello","dataset_len":10,"store_port":4000,"epochs":2,"pid":7}`, ""},
		{`{"op":"step","gen":3,"meta":[4,0,0,0,1,0,4,2],"loss":1.5}`, ""},
		{`{"op":"store_wait","gen":3,"keys":["a","b"],"timeout_ms":100}`, ""},
		{`{"op":"adopt","progress":{"applied":4}}`, ""},
		{`{"op":"store_set","gen":1,"key":"k","value":null}`, ""},
		{`{"op":"nope"}`, `unknown op "nope"`},
		{`{"gen":1}`, "op: not a string"},
		{`{"op":"next","gen":1,"batch":8,"size":3}`, `next: unknown field "size"`},
		{`{"op":"next","gen":1.5,"batch":8}`, `next: field "gen": 1.5 is not of type int`},
		{`{"op":"step","gen":1,"meta":[1,"x"],"loss":0}`, `step: field "meta"`},
		{`{"op":"store_check","gen":1,"keys":"a"}`, `store_check: field "keys"`},
		{`{"op":"failed","gen":1,"error":3}`, `failed: field "error": 3 is not of type string`},
		{`{"op":"report","step":12,"epoch":1,"values":{"loss":0.5,"val_loss":1}}`, ""},
		{`{"op":"report","step":12,"values":{"loss":"0.5"}}`, `report: field "values"`},
		{`{"op":"report","step":12,"values":[0.5]}`, `report: field "values"`},
		{`{"op":"report","step":12,"values":{},"non_finite":{"loss":"NaN","acc":"-Infinity"}}`, ""},
		{`{"op":"report","step":12,"non_finite":{"loss":"nan"}}`, `report: field "non_finite"`},
		{`{"op":"report","step":12,"non_finite":{"loss":1}}`, `report: field "non_finite"`},
		{`{"op":"step","gen":3,"meta":[4,0,0,0,1,0,4,2],"loss":null,"loss_non_finite":"Infinity"}`, ""},
	}
	for _, tc := range tests {
		err := protocol.checkRequest([]byte(tc.line))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.line, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.line, err, tc.err)
		}
	}
}

// TestProtocolShapesReplies: a reply carries its op's fields (the
// "always" ones even when zero) and no other op's.
func TestProtocolShapesReplies(t *testing.T) {
	keys := func(op string, rep liveReply) []string {
		b, err := protocol.encodeReply(op, rep)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	tests := []struct {
		op   string
		rep  liveReply
		want []string
	}{
		{"latest", liveReply{Gen: 3, Applied: 9, Part: 2}, []string{"gen"}},
		{"latest", liveReply{Gen: 3, Broken: true}, []string{"broken", "gen"}},
		{"gen", liveReply{Action: "run", Gen: 2, World: 2}, []string{"action", "applied", "epoch", "gen", "have", "rank", "root", "world"}},
		{"failed", liveReply{Applied: 4}, nil},
		{"store_add", liveReply{liveStoreReply: liveStoreReply{Num: 2}, Rank: 1}, []string{"num"}},
		{"report", liveReply{Kept: true, Applied: 3}, []string{"kept"}},
		{"report", liveReply{}, nil},
		{"store_get", liveReply{Error: "timeout", liveStoreReply: liveStoreReply{Superseded: true}}, []string{"error", "superseded"}},
		{"nope", liveReply{Error: `unknown op "nope"`, Rank: 2}, []string{"error"}},
	}
	for _, tc := range tests {
		if got := keys(tc.op, tc.rep); !slices.Equal(got, tc.want) {
			t.Errorf("%s reply %+v: fields %v, want %v", tc.op, tc.rep, got, tc.want)
		}
	}
}
