package cli

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// UsageError is a bad command line or a bad EDL_* value; it exits 2.
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return UsageError{msg: fmt.Sprintf(format, args...)}
}

// NewFlagSet returns a flag set for "edl <name>" whose errors are returned,
// not printed and exited on, so that ParseFlags can name the flag at fault.
func NewFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
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
	return fmt.Sprintf(", e.g. --%s from %s", first, EnvName(first))
}

// EnvName is the environment variable that backs a flag: data-dir -> EDL_DATA_DIR.
func EnvName(flagName string) string {
	return "EDL_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// ParseFlags parses args, then fills every flag not given on the command line
// from its EDL_* variable. --help prints usage and returns flag.ErrHelp.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return flag.ErrHelp // the flag package has printed the usage
		}
		return Usagef("%s: %v (see 'edl %s --help')", fs.Name(), err, strings.TrimPrefix(fs.Name(), "edl "))
	}
	if fs.NArg() > 0 {
		return Usagef("%s: unexpected argument %q (see '%s --help')", fs.Name(), fs.Arg(0), fs.Name())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		v, ok := os.LookupEnv(EnvName(f.Name))
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = Usagef("%s: invalid value %q for flag --%s from %s: %v", fs.Name(), v, f.Name, EnvName(f.Name), serr)
		}
	})
	if err != nil {
		return err
	}
	return finiteFloats(fs)
}

// finiteFloats refuses a float flag set to NaN or an infinity, which
// strconv.ParseFloat (and so the flag package) accepts: NaN fails every
// comparison, so a later range check would let it through.
func finiteFloats(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		if v, ok := g.Get().(float64); ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = Usagef("%s: --%s %v: must be a finite number", fs.Name(), f.Name, v)
		}
	})
	return err
}

// maxSeconds is the longest time.Duration in seconds, rounded down: about
// 292 years.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

// Seconds is a flag given in seconds (a float64, finite after ParseFlags) as
// a time.Duration; a value beyond time.Duration's range (about 292 years
// either way) is a usage error naming the flag, not a wrapped-around one.
func Seconds(flagName string, v float64) (time.Duration, error) {
	if math.IsNaN(v) || math.Abs(v) > maxSeconds {
		return 0, Usagef("--%s %g: out of range (at most %g seconds either way)", flagName, v, maxSeconds)
	}
	return time.Duration(v * float64(time.Second)), nil
}
