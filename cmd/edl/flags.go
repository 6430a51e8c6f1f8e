package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// usageError is a bad command line or a bad EDL_* value; it exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// newFlagSet returns a flag set for "edl <name>" whose errors are returned,
// not printed and exited on, so that parseFlags can name the flag at fault.
func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("edl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edl %s [flags]\n\n%s\n\nflags (each also read from EDL_<NAME>%s):\n", name, summary, envExample(fs))
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// envExample names one of the flag set's own flags and its variable, for
// the usage header (", e.g. --store from EDL_STORE"); "" without flags.
func envExample(fs *flag.FlagSet) string {
	var first string
	fs.VisitAll(func(f *flag.Flag) {
		if first == "" {
			first = f.Name
		}
	})
	if first == "" {
		return ""
	}
	return fmt.Sprintf(", e.g. --%s from %s", first, envName(first))
}

// envName is the environment variable that backs a flag: data-dir -> EDL_DATA_DIR.
func envName(flagName string) string {
	return "EDL_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// parseFlags parses args, then fills every flag not given on the command line
// from its EDL_* variable. --help prints usage and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return flag.ErrHelp // the flag package has printed the usage
		}
		return usageErrorf("%s: %v (see 'edl %s --help')", fs.Name(), err, strings.TrimPrefix(fs.Name(), "edl "))
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q (see '%s --help')", fs.Name(), fs.Arg(0), fs.Name())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = usageErrorf("%s: invalid value %q for flag --%s from %s: %v", fs.Name(), v, f.Name, envName(f.Name), serr)
		}
	})
	return err
}
