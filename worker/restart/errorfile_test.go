package restart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/edl-nomad/edl/jobs"
)

func TestErrorFileMessage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"record", `{"message": {"message": "ValueError: bad shard 7", "extraInfo": {"py_callstack": "Traceback...", "timestamp": "1700000000"}}}`, "ValueError: bad shard 7"},
		{"plain message", `{"message": "SIGSEGV in the data loader", "timestamp": 1700000000}`, "SIGSEGV in the data loader"},
		{"not JSON", `Traceback (most recent call last):`, ""},
		{"no message", `{"errorCode": 3}`, ""},
		{"long", `{"message": {"message": "` + strings.Repeat("x", 5000) + `"}}`, strings.Repeat("x", maxErrorMessage) + "..."},
	} {
		p := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := errorFileMessage(p); got != tc.want {
			t.Errorf("%s: %.80q, want %.80q", tc.name, got, tc.want)
		}
	}
	// Cut at the byte bound, a two-byte rune is not left half there.
	p := filepath.Join(dir, "runes.json")
	if err := os.WriteFile(p, []byte(`{"message": "x`+strings.Repeat("é", 2000)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := errorFileMessage(p); !utf8.ValidString(got) || !strings.HasSuffix(got, "é...") {
		t.Errorf("a long message of two-byte runes: %.40q ... %q", got, got[max(0, len(got)-8):])
	}
	if got := errorFileMessage(filepath.Join(dir, "none.json")); got != "" {
		t.Errorf("no file: %q", got)
	}
}

// A program that fails through torch's @record names its exception in the
// job's reason, as torchrun's failure summary does (its root cause).
func TestExecFailureNamesItsRootCause(t *testing.T) {
	needTorch(t)
	const prog = "from torch.distributed.elastic.multiprocessing.errors import record\n" +
		"@record\ndef main():\n    raise ValueError('bad shard 7')\nmain()\n"
	r := newExecRunOf(t, 1, 1, 0, func(e *jobs.ExecTrainer) { e.Command = []string{python, "-c", prog} })
	r.add("w0")
	st, reason := r.wait(60 * time.Second)
	if st != jobs.Failed || !strings.Contains(reason, "exit code 1: ValueError: bad shard 7") {
		t.Fatalf("job %s, reason %q: want failed, naming the exception after the exit", st, reason)
	}
}

// A program that cannot start wrote no stderr: the reason ends at the
// cause, not at an empty "last stderr lines:".
func TestExecThatCannotStartNamesWhy(t *testing.T) {
	r := newExecRunOf(t, 1, 1, 0, func(e *jobs.ExecTrainer) { e.Command = []string{"/nonexistent/edl-test-program"} })
	r.add("w0")
	st, reason := r.wait(60 * time.Second)
	if st != jobs.Failed || !strings.Contains(reason, "could not start") || !strings.Contains(reason, "no such file") || strings.Contains(reason, "stderr") {
		t.Fatalf("job %s, reason %q: want failed, naming why it could not start, and no stderr part", st, reason)
	}
}
