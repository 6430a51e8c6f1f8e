package warm

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

//go:embed boot.py
var bootSrc string

// Command is a Python command line as the interpreter reads it:
// INTERP [OPTS] SCRIPT ARGS or INTERP [OPTS] -m MODULE ARGS.
type Command struct {
	Interp string   // the interpreter, as given (resolved on PATH by the caller)
	Opts   []string // interpreter options before the script, kept for the warm one
	Script string   // the script, as given; empty with Module
	Module string   // -m MODULE
	Args   []string // the program's own arguments
}

var pythonName = regexp.MustCompile(`^python(\d+(\.\d+)?)?$`)

// Options of CPython 3 that take no value and change nothing a warm start
// cannot keep (the warm interpreter is started with them too).
var flagOpts = map[byte]bool{'b': true, 'B': true, 'd': true, 'E': true, 'I': true, 'O': true,
	'P': true, 'q': true, 's': true, 'S': true, 'u': true, 'v': true, 'R': true}

// Parse splits argv. Its error says why the command cannot start warm:
// not a Python interpreter, -c or stdin code, -i, an option it does not know.
func Parse(argv []string) (Command, error) {
	if len(argv) == 0 {
		return Command{}, errors.New("no command")
	}
	if !pythonName.MatchString(filepath.Base(argv[0])) {
		return Command{}, fmt.Errorf("%s is not a Python interpreter (python, python3, python3.N)", filepath.Base(argv[0]))
	}
	c := Command{Interp: argv[0]}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-m" || strings.HasPrefix(a, "-m") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			mod := strings.TrimPrefix(a, "-m")
			if mod == "" {
				if i+1 >= len(argv) {
					return Command{}, errors.New("-m without a module")
				}
				i++
				mod = argv[i]
			}
			c.Module, c.Args = mod, append([]string{}, argv[i+1:]...)
			return c, nil
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			if i+1 >= len(argv) {
				return Command{}, fmt.Errorf("%s without a value", a)
			}
			c.Opts = append(c.Opts, a, argv[i+1])
			i++
		case strings.HasPrefix(a, "-W") || strings.HasPrefix(a, "-X"):
			c.Opts = append(c.Opts, a)
		case a == "-" || a == "-c" || strings.HasPrefix(a, "-c"):
			return Command{}, errors.New("code on the command line or stdin (-c, -) starts cold")
		case a == "--":
			if i+1 >= len(argv) {
				return Command{}, errors.New("no script after --")
			}
			c.Script, c.Args = argv[i+1], append([]string{}, argv[i+2:]...)
			return c, nil
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				if a[j] == 'i' {
					return Command{}, errors.New("-i (interactive) starts cold")
				}
				if !flagOpts[a[j]] {
					return Command{}, fmt.Errorf("interpreter option %s is not one a warm start knows", a)
				}
			}
			c.Opts = append(c.Opts, a)
		default:
			c.Script, c.Args = a, append([]string{}, argv[i+1:]...)
			return c, nil
		}
	}
	return Command{}, errors.New("no script or -m module (an interactive interpreter starts cold)")
}

// BootFile is the name WriteBoot gives boot.py in a folder.
const BootFile = "edl-warm-boot.py"

// WriteBoot writes boot.py into dir (once: an unchanged file is left as
// it is) and returns its path, for Argv. The warm interpreter runs it as
// its script, so that its command line stays one short line in ps and
// /proc (`python3 [OPTS] DIR/edl-warm-boot.py SPEC`).
func WriteBoot(dir string) (string, error) {
	path, err := filepath.Abs(filepath.Join(dir, BootFile))
	if err != nil {
		return "", fmt.Errorf("warm start: %w", err)
	}
	if b, err := os.ReadFile(path); err == nil && string(b) == bootSrc {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("warm start: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(bootSrc), 0o644); err != nil {
		return "", fmt.Errorf("warm start: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("warm start: %w", err)
	}
	return path, nil
}

// Argv is the warm interpreter's command line: the job's interpreter and
// options, boot.py (bootPath, from WriteBoot), and what it runs. ctlFD
// and readyFD are the descriptors the child has Boot's pipes on.
func (c Command) Argv(bootPath string, ctlFD, readyFD int, preload []string) []string {
	if preload == nil {
		preload = []string{}
	}
	args := c.Args
	if args == nil {
		args = []string{}
	}
	spec, _ := json.Marshal(map[string]any{"ctl": ctlFD, "ready": readyFD, "preload": preload,
		"script": c.Script, "module": c.Module, "args": args})
	out := append([]string{c.Interp}, c.Opts...)
	return append(out, bootPath, string(spec))
}
