package worker

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestModesImportOnlyTheCore holds the worker's shape (doc.go): the modes
// import the core and never each other, the core imports no mode, and
// nothing under worker/ imports this front.
func TestModesImportOnlyTheCore(t *testing.T) {
	const mod = "github.com/edl-nomad/edl/worker"
	modes := []string{"builtin", "restart", "live"}
	imports := func(dir string) []string {
		p, err := build.ImportDir(filepath.Join(".", dir), 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		return p.Imports
	}
	isMode := func(path string) bool {
		for _, m := range modes {
			if path == mod+"/"+m {
				return true
			}
		}
		return false
	}
	for _, dir := range append([]string{"core", "internal/workertest", "elasticbench", "coord", "datapipe", "collective", "trainer"}, modes...) {
		for _, imp := range imports(dir) {
			switch {
			case imp == mod:
				t.Errorf("worker/%s imports the front, worker", dir)
			case isMode(imp) && imp != mod+"/"+dir:
				t.Errorf("worker/%s imports the mode %s", dir, strings.TrimPrefix(imp, mod+"/"))
			}
		}
	}
	for _, m := range modes {
		core := false
		for _, imp := range imports(m) {
			core = core || imp == mod+"/core"
		}
		if !core {
			t.Errorf("worker/%s does not import worker/core", m)
		}
	}
}
