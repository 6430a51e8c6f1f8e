package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C on a client verb that follows something (edl events -f, logs -f,
// watch) printed "edl: context canceled" and exited 1, the status of a
// problem from the API. It exits 130, as an interrupted program does, and
// says nothing.
func TestInterruptedClientVerbExits130Quietly(t *testing.T) {
	events := commands["events"]
	defer func() { commands["events"] = events }()
	following := events
	following.run = func(ctx context.Context, _ []string, _, _ io.Writer) error {
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("GET /v1/jobs/j-1/events: %w", ctx.Err())
		case <-time.After(10 * time.Second):
			return fmt.Errorf("no interrupt arrived")
		}
	}
	commands["events"] = following
	var stderr bytes.Buffer
	code := runMain([]string{"events", "j-1", "-f"}, io.Discard, &stderr)
	if code != exitInterrupted || stderr.Len() != 0 {
		t.Errorf("interrupted: exit %d, stderr %q; want %d and nothing", code, stderr.String(), exitInterrupted)
	}

	// A cancellation that is not the user's is still an error.
	canceled := events
	canceled.run = func(ctx context.Context, _ []string, _, _ io.Writer) error {
		return fmt.Errorf("GET /v1/jobs/j-1/events: %w", context.Canceled)
	}
	commands["events"] = canceled
	stderr.Reset()
	if code := runMain([]string{"events", "j-1"}, io.Discard, &stderr); code != 1 || stderr.Len() == 0 {
		t.Errorf("a cancellation without a signal: exit %d, stderr %q; want 1 and the error", code, stderr.String())
	}
}
