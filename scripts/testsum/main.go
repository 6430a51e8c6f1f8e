package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	rawPath := flag.String("json", "", "also write the raw go test -json stream to this file")
	slowest := flag.Int("slowest", 5, "how many of the slowest packages and tests to list")
	packages := flag.Bool("packages", false, "print only each package's minutes and result, slowest first")
	flag.Parse()
	if *packages {
		s := newSummary(io.Discard)
		if err := s.read(os.Stdin); err != nil {
			fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
		}
		s.printPackages(os.Stdout)
		return
	}
	var in io.Reader = os.Stdin
	if *rawPath != "" {
		f, err := os.Create(*rawPath)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}
	out := bufio.NewWriter(os.Stdout)
	s := newSummary(out)
	// go test keeps a package's output until the package ends, so a run
	// killed from outside (a CI or shell time limit) used to end with no
	// output at all. Interrupted, testsum prints what the running tests
	// said so far and the summary before it exits.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	read := make(chan error, 1)
	go func() { read <- s.read(in) }()
	interrupted := false
	select {
	case err := <-read:
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
		}
	case sig := <-sigs:
		interrupted = true
		s.interrupt(sig.String())
	}
	s.finish(*slowest)
	out.Flush()
	if interrupted || s.failed() {
		os.Exit(1)
	}
}
