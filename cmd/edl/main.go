package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// command is one `edl` subcommand. Each lives in its own file and registers
// itself from init, so subcommands can be added without touching this file.
type command struct {
	name    string
	summary string
	// hidden commands are internal (peer processes of benchmarks) and not
	// listed by --help.
	hidden bool
	// run parses args (use parseFlags) and does the work; ctx ends on SIGINT/SIGTERM.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("edl: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain is main without the process exit, so tests can drive it.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "edl: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.run(ctx, args[1:], stdout, stderr)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) && slices.Contains(clientVerbs, c.name) {
		// Ctrl-C (or SIGTERM) ended what a client verb was doing, such as
		// following events or logs: no "edl: context canceled", and the
		// shell's status for an interrupt, not 1 (a problem from the API).
		// dev, serve and worker keep theirs.
		return exitInterrupted
	}
	return exitCode(err, stderr)
}

// exitInterrupted is the status of a client verb that a signal ended (128 +
// SIGINT, as a shell reports it).
const exitInterrupted = 130

// exitCode maps a command's error to the process exit status: 0 for success
// or --help, 2 for usage errors, an error's own ExitCode() (edl watch: the
// job's outcome), 1 for everything else.
func exitCode(err error, stderr io.Writer) int {
	var uerr usageError
	var coded interface{ ExitCode() int }
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	// An error can quote the server (a problem's title and detail, a body
	// that was not JSON): its control characters are made visible.
	fmt.Fprintf(stderr, "edl: %s\n", termSafe(err.Error()))
	switch {
	case errors.As(err, &coded):
		return coded.ExitCode()
	case errors.As(err, &uerr):
		return 2
	default:
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: edl <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if c.hidden {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	text := "Run 'edl <command> --help' for a command's flags. The flags of " +
		strings.Join(envFlagCommands, ", ") + " can also be set with an EDL_* environment variable: " +
		"--data-dir is EDL_DATA_DIR. The client verbs (" + strings.Join(clientVerbs, ", ") +
		") read only EDL_SERVER (--server) and EDL_TOKEN (--token)."
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > 88 {
			fmt.Fprintln(w, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

// envFlagCommands read every flag from EDL_<NAME> (internal/cli); the
// clientVerbs only --server and --token (client.go). TestUsageSaysWhichFlagsReadTheEnvironment
// holds both lists to each command's own --help.
var (
	envFlagCommands = []string{"dev", "serve", "worker", "sim", "bench", "gpus", "tenant-token"}
	clientVerbs     = []string{"submit", "ls", "get", "watch", "scale", "events", "logs", "checkpoints", "model", "cancel", "sweep"}
)
