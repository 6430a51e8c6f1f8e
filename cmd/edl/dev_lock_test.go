package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Two edl dev on one --data-dir each ran a redis-server on the same
// append-only file; the second is refused by name, and the folder is free
// again once the first lets go.
func TestDataDirTakenOnce(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), fmt.Sprintf("in use by another edl dev (pid %d)", os.Getpid())) {
		t.Fatalf("second lock: %v, want a usage error naming this pid", err)
	}
	first.Close()
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	again.Close()
}
