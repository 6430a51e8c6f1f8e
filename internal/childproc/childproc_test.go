package childproc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStopEndsTheGroupAndKeepsTheOutput(t *testing.T) {
	// The shell ignores SIGTERM and its child sleeps: Stop must still end
	// both, by SIGKILL to the group after the grace.
	p, err := Start(exec.Command("sh", "-c", `trap "" TERM; echo started; sleep 60 & echo $! ; wait`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx, 10*time.Millisecond, 0, func() error {
		if strings.Count(p.Output(), "\n") < 2 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("WaitReady: %v (output %q)", err, p.Output())
	}
	var sleeper int
	if _, err := fmt.Sscan(strings.Fields(p.Output())[1], &sleeper); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Stop(200 * time.Millisecond)
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is open after Stop")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Stop returned after %s; the shell ignores SIGTERM, so it should have waited the grace", d)
	}
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(sleeper, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the group's sleep (pid %d) outlived Stop", sleeper)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(p.Output(), "started\n") {
		t.Errorf("Output = %q, want it to start with the child's first line", p.Output())
	}
}

func TestWaitReady(t *testing.T) {
	failing := func() error { return errors.New("no answer") }
	for _, tc := range []struct {
		name    string
		script  string
		probe   func() error
		timeout time.Duration
		want    func(error) bool
	}{
		{"answers", "sleep 60", func() error { return nil }, 0, func(err error) bool { return err == nil }},
		{"exits", "exit 3", failing, 0, func(err error) bool { return errors.Is(err, ErrExited) }},
		{"never answers", "sleep 60", failing, 100 * time.Millisecond, func(err error) bool { return err != nil && err.Error() == "no answer" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(exec.Command("sh", "-c", tc.script))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.WaitReady(ctx, 10*time.Millisecond, tc.timeout, tc.probe); !tc.want(err) {
				t.Errorf("WaitReady = %v", err)
			}
		})
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcdef", 2, "...ef"},
		{"", 1, ""},
	} {
		if got := Tail(tc.s, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
