package core

// How every process of a program is found and killed, whatever it does
// with sessions and process groups (a setsid double-fork, setpgid(0,0)).
//
// Each program runs under its own reaper (reaper.go), a child of the
// worker that is always a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
// an orphaned descendant is reparented to it, not to init, so the tree
// under the reaper is exactly the program's processes, and the reaper
// SIGKILLs and reaps all of them before it exits. Where the machine has a
// writable cgroup v2 hierarchy (the unified mount, or /sys/fs/cgroup on a
// v2-only machine), the program also starts in a cgroup of its own
// (clone3 CLONE_INTO_CGROUP) and is killed with cgroup.kill, which no
// process of it can leave without privileges; the subreaper walk runs
// anyway and covers a machine with cgroup v1 only, or one where the
// cgroup cannot be made. A process that escapes both is one that gained
// the privilege to move itself between cgroups (root in a cgroup
// namespace it controls) and re-parented itself away (ptrace): the
// program's user is the real boundary there (docs/exec.md, safety).

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// containMode is how a reaper contains its program.
type containMode string

const (
	// containAuto: a cgroup of its own where cgroup v2 is writable, plus
	// the subreaper walk.
	containAuto containMode = "auto"
	// containSubreaper: the subreaper walk only (tests of that path).
	containSubreaper containMode = "subreaper"
)

// progCgroup is a program's own cgroup v2 directory.
type progCgroup struct {
	dir string
	fd  int
}

// newProgCgroup makes a cgroup for the program under this process's own
// cgroup v2; an error means the subreaper walk alone contains it.
func newProgCgroup() (*progCgroup, error) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return nil, errors.New("no cgroup v2 entry in /proc/self/cgroup")
	}
	dir := filepath.Join(mnt, own, "edl-prog-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("no cgroup.kill (kernel before 5.14): %w", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &progCgroup{dir: dir, fd: fd}, nil
}

// kill SIGKILLs every process in the cgroup.
func (c *progCgroup) kill() {
	_ = os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
}

// remove deletes the (empty) cgroup.
func (c *progCgroup) remove() {
	_ = syscall.Close(c.fd)
	_ = os.Remove(c.dir)
}

// cgroup2Mount is where a cgroup v2 hierarchy is mounted, from mountinfo.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if ok && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") && !strings.Contains(" "+fields[5]+",", ",ro,") {
			return fields[4], nil
		}
	}
	return "", errors.New("no cgroup v2 mount")
}

// descendants lists every process below pid, from /proc (parents first).
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := parentOf(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentOf reads a process's parent from /proc/<pid>/stat (0 if gone).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}
