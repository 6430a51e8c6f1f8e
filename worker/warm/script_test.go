package warm

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWarmScriptPathLikeCold: how CPython itself treats the script
// argument, warm as cold: a relative name is made absolute without being
// normalised (`./prog.py` is `CWD/./prog.py` in __file__ and tracebacks),
// a script that cannot be opened is exit 2 with the interpreter's own
// "can't open file" line (a typo in a job's command reads as it does under
// torchrun), and a folder or zip file with a __main__.py runs that; the
// module's globals are those CPython gives __main__ (__annotations__ too).
func TestWarmScriptPathLikeCold(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	show := "import sys\nprint(repr(__file__), sys.argv, repr(sys.path[0]), sorted(globals()))\n"
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte(show), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	mainSrc := "import sys\nprint(repr(__file__), sys.argv, repr(sys.path[0]), __name__, sorted(globals()))\n"
	if err := os.WriteFile(filepath.Join(dir, "app", "__main__.py"), []byte(mainSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, "app.pyz"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(zf)
	w, _ := zw.Create("__main__.py")
	_, _ = w.Write([]byte(mainSrc))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zf.Close()
	base := []string{"PATH=/usr/bin:/bin"}
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"dot-relative", []string{python, "./prog.py", "a"}},
		{"parent-relative", []string{python, "../" + filepath.Base(dir) + "/prog.py"}},
		{"missing", []string{python, "nosuch.py", "--x"}},
		{"missing-absolute", []string{python, filepath.Join(dir, "nosuch.py")}},
		{"folder", []string{python, "app", "b"}},
		{"zip", []string{python, "app.pyz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"RANK=0"}, base...)
			c := cold(t, dir, tc.argv, env)
			w := warmRun(t, dir, tc.argv, base, env)
			if c.code != w.code || c.stdout != w.stdout || strings.TrimSpace(c.stderr) != strings.TrimSpace(w.stderr) {
				t.Errorf("cold and warm differ:\ncold (exit %d): %q stderr %q\nwarm (exit %d): %q stderr %q",
					c.code, c.stdout, c.stderr, w.code, w.stdout, w.stderr)
			}
			if strings.HasPrefix(tc.name, "missing") && (c.code != 2 || !strings.Contains(c.stderr, "can't open file")) {
				t.Errorf("cold run of a missing script: exit %d, stderr %q; want exit 2 and can't open file", c.code, c.stderr)
			}
		})
	}
}
