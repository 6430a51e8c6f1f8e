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
// -deps, as TestDomainDoesNotLinkRedis does); in cmd/edl itself only
// bench.go imports internal/bench, which holds every benchmark; and the
// edl binary links none of the fake Nomad, the test servers and the
// SeaweedFS harness unless it is built with the rigs tag (`edl bench e2e
// --nomad` and bench checkpoint's s3 figures need it; make bench does).
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

// harnesses are the rigs that only a build with the rigs tag links into
// the edl binary.
var harnesses = []string{mod + "nomadx/nomadtest", mod + "internal/testenv", mod + "checkpoint/weed"}

func TestBinaryLinksHarnessesOnlyWithTheRigsTag(t *testing.T) {
	for _, tags := range []string{"", "rigs"} {
		t.Run("tags="+tags, func(t *testing.T) {
			linked := map[string]string{} // harness -> a package that imports it
			for _, line := range goListDeps(t, mod+"cmd/edl", "-tags", tags) {
				fields := strings.Fields(line)
				for _, imp := range fields[1:] {
					for _, h := range harnesses {
						if imp == h || strings.HasPrefix(imp, h+"/") {
							linked[h] = fields[0]
						}
					}
				}
			}
			for _, h := range harnesses {
				by, ok := linked[h]
				switch {
				case tags == "" && ok:
					t.Errorf("the edl binary links the harness %s (%s imports it); only a -tags rigs build may", h, by)
				case tags == "rigs" && !ok && h != mod+"internal/testenv":
					t.Errorf("a -tags rigs build of edl does not link %s: edl bench lost what needs it", h)
				}
			}
		})
	}
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
// flags go before pkg (-tags rigs).
func goListDeps(t *testing.T, pkg string, flags ...string) []string {
	t.Helper()
	args := append(append([]string{"list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, flags...), pkg)
	out, err := exec.Command("go", args...).Output()
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
