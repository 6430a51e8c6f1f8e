package loopback

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Group is a set of running children, one per rank.
type Group struct {
	Addrs   []string
	Reports chan Received // every report after the address, from any child

	cmds []*exec.Cmd
	ins  []io.WriteCloser
	wg   sync.WaitGroup
}

// Received is a child's report with the time it arrived.
type Received struct {
	Report
	At  time.Time
	Err error // the child's stdout ended without a "done" report
}

// Start starts n children, made by command(rank), and waits for each to
// report its address. The children die with the parent (SIGKILL).
func Start(ctx context.Context, n int, job string, command func(rank int) *exec.Cmd) (*Group, error) {
	g := &Group{Addrs: make([]string, n), Reports: make(chan Received, 16*n)}
	addrs := make(chan error, n)
	for rank := range n {
		cmd := command(rank)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			g.Close()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			g.Close()
			return nil, err
		}
		var errBuf strings.Builder
		cmd.Stderr = &lockedWriter{w: &errBuf}
		if err := cmd.Start(); err != nil {
			g.Close()
			return nil, fmt.Errorf("start child %d: %w", rank, err)
		}
		g.cmds, g.ins = append(g.cmds, cmd), append(g.ins, in)
		if err := json.NewEncoder(in).Encode(map[string]string{"job": job}); err != nil {
			g.Close()
			return nil, fmt.Errorf("child %d: %w", rank, err)
		}
		g.wg.Add(1)
		go g.read(rank, out, addrs)
	}
	for range n {
		select {
		case err := <-addrs:
			if err != nil {
				g.Close()
				return nil, err
			}
		case <-ctx.Done():
			g.Close()
			return nil, ctx.Err()
		}
	}
	return g, nil
}

func (g *Group) read(rank int, out io.Reader, addrs chan<- error) {
	defer g.wg.Done()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	first, done := true, false
	for sc.Scan() {
		var rep Report
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			continue // not ours: a stray line from a test binary
		}
		if first && rep.Event == "addr" {
			first = false
			g.Addrs[rank] = rep.Addr
			addrs <- nil
			continue
		}
		done = done || rep.Event == "done"
		g.Reports <- Received{Report: rep, At: time.Now()}
	}
	if first {
		addrs <- fmt.Errorf("child %d exited before reporting its address: %s", rank, g.Stderr(rank))
		return
	}
	if !done {
		g.Reports <- Received{Report: Report{Rank: rank}, At: time.Now(), Err: errors.New("child exited without a report")}
	}
}

// Send hands each child its task: task with Rank and Peers filled in.
func (g *Group) Send(task Task) error {
	for rank, in := range g.ins {
		t := task
		t.Rank, t.Peers = rank, g.Addrs
		if err := json.NewEncoder(in).Encode(t); err != nil {
			return fmt.Errorf("send task to child %d: %w", rank, err)
		}
	}
	return nil
}

// Collect waits for n "done" reports (or child exits), indexed by rank.
func (g *Group) Collect(ctx context.Context, n int) ([]Received, error) {
	got := make([]Received, len(g.cmds))
	for i := 0; i < n; {
		select {
		case r := <-g.Reports:
			if r.Event != "done" && r.Err == nil {
				continue
			}
			got[r.Rank] = r
			i++
		case <-ctx.Done():
			return got, ctx.Err()
		}
	}
	return got, nil
}

// Signal sends sig to the child of rank.
func (g *Group) Signal(rank int, sig syscall.Signal) error {
	return g.cmds[rank].Process.Signal(sig)
}

// Stderr is what the child of rank wrote to stderr so far.
func (g *Group) Stderr(rank int) string {
	w := g.cmds[rank].Stderr.(*lockedWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

// Close kills the children that are still running and reaps them all.
func (g *Group) Close() {
	for _, in := range g.ins {
		_ = in.Close()
	}
	for _, c := range g.cmds {
		if c.Process != nil {
			_ = c.Process.Signal(syscall.SIGCONT)
			_ = c.Process.Kill()
		}
	}
	g.wg.Wait()
	for _, c := range g.cmds {
		_ = c.Wait()
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
