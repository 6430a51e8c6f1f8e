package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// devLockFile is the file in --data-dir that one edl dev at a time holds
// locked (flock: the kernel drops it when the process dies, however).
const devLockFile = "edl-dev.lock"

// lockDataDir takes --data-dir for this process. A second edl dev on the
// same folder started its own redis-server on the same append-only file,
// and the two wrote over each other's jobs; it is refused now, naming the
// holder's PID.
func lockDataDir(dataDir string) (*os.File, error) {
	path := filepath.Join(dataDir, devLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dev: --data-dir %s: lock: %w", dataDir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf("another edl dev (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, usageErrorf("dev: --data-dir %s is in use by %s: stop it, or give this one another --data-dir", dataDir, holder)
		}
		return nil, fmt.Errorf("dev: --data-dir %s: lock: %w", dataDir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
