package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const mod = "github.com/edl-nomad/edl/"

// rigs are test and benchmark harnesses: the fake Nomad, the test servers,
// the SeaweedFS harness and the benchmarks themselves.
var rigs = []string{
	mod + "nomadx/nomadtest",
	mod + "internal/testenv",
	mod + "checkpoint/weed",
	mod + "checkpoint/cpbench",
	mod + "api/apibench",
	mod + "worker/elasticbench",
	mod + "planner/clustertest",
	mod + "internal/bench",
}

// TestProductDoesNotLinkRigs keeps the rigs out of what `edl serve`, `edl
// dev` and `edl worker` run: no product package depends on one (go list
// -deps, as TestDomainDoesNotLinkRedis does), and in cmd/edl itself only
// bench.go imports internal/bench, which holds every benchmark and is the
// one way in for the rigs (`edl bench e2e --nomad` drives the fake Nomad).
func TestProductDoesNotLinkRigs(t *testing.T) {
	product := []string{
		"api", "api/ui", "openapi", "jobs", "jobs/jobstore", "planner", "planner/loop",
		"worker", "worker/coord", "worker/collective", "worker/datapipe", "worker/trainer",
		"local", "local/redisproc", "nomadx", "nomadx/gpuenv", "checkpoint",
		"internal/cli", "internal/gpustat",
	}
	for _, p := range product {
		pkg := mod + p
		t.Run(p, func(t *testing.T) {
			for _, line := range goListDeps(t, pkg) {
				fields := strings.Fields(line)
				for _, imp := range fields[1:] {
					if isRig(imp) {
						t.Errorf("%s depends on the rig %s: %s imports it", pkg, imp, fields[0])
					}
				}
			}
		})
	}
	t.Run("cmd/edl", func(t *testing.T) {
		files, err := filepath.Glob("*.go")
		if err != nil || len(files) < 10 {
			t.Fatalf("glob cmd/edl: %d files, %v", len(files), err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, is := range af.Imports {
				imp, _ := strconv.Unquote(is.Path.Value)
				if isRig(imp) && (f != "bench.go" || imp != mod+"internal/bench") {
					t.Errorf("cmd/edl/%s imports the rig %s; only bench.go may, and only internal/bench", f, imp)
				}
			}
		}
	})
}

func isRig(imp string) bool {
	for _, r := range rigs {
		if imp == r || strings.HasPrefix(imp, r+"/") {
			return true
		}
	}
	return false
}

// goListDeps returns one line per dependency of pkg: its path, then its imports.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 {
		t.Fatalf("go list -deps %s listed %d packages; want the package and its dependencies", pkg, len(lines))
	}
	return lines
}
