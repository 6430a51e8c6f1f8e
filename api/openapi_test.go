package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/openapi"
	"github.com/edl-nomad/edl/openapi/oas3"
)

// SwagArgs are the arguments of `make openapi` after the output folder; keep
// the Makefile's line and this one the same.
var swagArgs = []string{"init", "-q", "-g", "server.go", "-d", "./api,./jobs", "--outputTypes", "json,yaml", "-o"}

func TestOpenAPIIsUpToDate(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	swag := filepath.Join(root, ".tools", "bin", "swag")
	if _, err := os.Stat(swag); err != nil {
		if swag, err = exec.LookPath("swag"); err != nil {
			testenv.Unavailable(t, "swag not found in .tools/bin or PATH")
		}
	}
	out := t.TempDir()
	cmd := exec.Command(swag, append(swagArgs, out)...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("swag: %v\n%s", err, b)
	}
	for _, name := range []string{"swagger.json", "swagger.yaml"} {
		fresh, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join(root, "openapi", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("openapi/%s is stale: run 'make openapi' and commit the result", name)
		}
	}
	// The served OpenAPI 3 document is the conversion of the committed 2.0.
	swagger2, err := os.ReadFile(filepath.Join(root, "openapi", "swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	j, y, err := oas3.Convert(swagger2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(j, openapi.JSON()) || !bytes.Equal(y, openapi.YAML()) {
		t.Errorf("openapi/openapi.json or .yaml is stale: run 'make openapi' and commit the result")
	}
}

var echoParam = regexp.MustCompile(`:([a-zA-Z_]+)`)

func TestEveryRouteIsInTheSpec(t *testing.T) {
	var spec struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &spec); err != nil {
		t.Fatal(err)
	}
	ts, _ := jobs.NewTenants(jobs.Tenant{Name: "a", TokenSHA256: jobs.HashToken("x")})
	srv := api.New(api.Config{}, nil, ts, nil, nil)
	routes := srv.Routes()
	if len(routes) < 15 {
		t.Fatalf("only %d routes registered: %v", len(routes), routes)
	}
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		if path == "/docs/*" || path == "/ui/*" { // the UIs' static files
			continue
		}
		path = echoParam.ReplaceAllString(path, "{$1}")
		if _, ok := spec.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("route %s %s is not in openapi/swagger.json", method, path)
		}
	}
	// And the spec documents nothing the server does not serve.
	served := map[string]bool{}
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		served[strings.ToLower(method)+" "+echoParam.ReplaceAllString(path, "{$1}")] = true
	}
	for path, ops := range spec.Paths {
		for method := range ops {
			if !served[method+" "+path] {
				t.Errorf("spec documents %s %s, which the server does not serve", method, path)
			}
		}
	}
}

// Every operation that takes a body answers 400 (malformed JSON), 408 (a
// body not sent in time), 413 (over the limit), 415 (another media type or
// a content coding) and 422 (fields at fault) through the same readBody and
// decoder: the spec lists each, as a client generated from it would be
// told. PATCH and scale listed some and left the others to "default".
func TestBodyOperationsListTheirBodyErrors(t *testing.T) {
	var spec struct {
		Paths map[string]map[string]struct {
			RequestBody json.RawMessage            `json:"requestBody"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &spec); err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, ops := range spec.Paths {
		for method, op := range ops {
			if op.RequestBody == nil {
				continue
			}
			n++
			for _, code := range []string{"400", "408", "413", "415", "422"} {
				if _, ok := op.Responses[code]; !ok {
					t.Errorf("%s %s takes a body but does not list %s", strings.ToUpper(method), path, code)
				}
			}
		}
	}
	if n < 4 {
		t.Fatalf("only %d operations take a body", n)
	}
}
