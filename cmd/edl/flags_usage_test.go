package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestServeHelpNamesItsOwnFlags: the usage header's example flag is one
// the command has (`edl serve --help` named --data-dir, a flag of edl dev).
func TestServeHelpNamesItsOwnFlags(t *testing.T) {
	var stderr bytes.Buffer
	_ = runServe(context.Background(), []string{"--help"}, &bytes.Buffer{}, &stderr)
	out := stderr.String()
	if !strings.Contains(out, "usage: edl serve") {
		t.Fatalf("no usage printed: %q", out)
	}
	header, _, _ := strings.Cut(out, "\n  -")
	if strings.Contains(out, "data-dir") {
		t.Errorf("edl serve --help mentions --data-dir, which serve does not have:\n%s", header)
	}
}
