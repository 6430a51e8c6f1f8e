package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The worker's Redis login never travels on its command line, which every
// process of the machine can read (/proc/PID/cmdline): `--redis` names the
// server, and the user and password come from
//
//	EDL_REDIS_USER            the ACL user (default: the URL's, else "default")
//	EDL_REDIS_PASSWORD        the password (Nomad: the task's environment)
//	EDL_REDIS_PASSWORD_FILE   a file holding it, removed once read (edl dev)
//
// which are then taken out of the environment the program inherits, and
// the worker makes itself non-dumpable, so that a program running as the
// same (non-root) user cannot read /proc/<worker>/environ or its memory.
// A program running as root can still read both: the per-job ACL user is
// what bounds it then (docs/exec.md, safety).

// workerRedisAuth returns the login from the environment and removes it
// from there; fileErr is about a password file that could not be read.
func workerRedisAuth(getenv func(string) string) (user, password string, fileErr error) {
	user, password = getenv("EDL_REDIS_USER"), getenv("EDL_REDIS_PASSWORD")
	if f := getenv("EDL_REDIS_PASSWORD_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			fileErr = fmt.Errorf("EDL_REDIS_PASSWORD_FILE: %w", err)
		} else {
			password = strings.TrimRight(string(b), "\r\n")
			_ = os.Remove(f)
		}
	}
	for _, k := range []string{"EDL_REDIS_USER", "EDL_REDIS_PASSWORD", "EDL_REDIS_PASSWORD_FILE"} {
		_ = os.Unsetenv(k)
	}
	return user, password, fileErr
}

// hideWorkerSecrets makes this process non-dumpable: /proc/<pid>/environ,
// mem and the like become root's only, and no core dump is written.
func hideWorkerSecrets() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// redactURL is a Redis URL without its password, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
