package warm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Boot is the worker's side of one warm interpreter: a control pipe it
// writes the generation's environment to, and a ready pipe the
// interpreter says "ready" on once its preloads are imported.
type Boot struct {
	ctlR, ctlW     *os.File
	readyR, readyW *os.File

	once  sync.Once
	ready chan struct{} // closed when the ready line (or EOF) has come
	err   error         // why it is not ready (nil once ready)
	fails []string      // preloads that failed to import (the program decides)
}

// NewBoot makes the two pipes.
func NewBoot() (*Boot, error) {
	b := &Boot{ready: make(chan struct{})}
	var err error
	if b.ctlR, b.ctlW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("warm start: control pipe: %w", err)
	}
	if b.readyR, b.readyW, err = os.Pipe(); err != nil {
		b.ctlR.Close()
		b.ctlW.Close()
		return nil, fmt.Errorf("warm start: ready pipe: %w", err)
	}
	return b, nil
}

// ChildFiles are the interpreter's ends, in the order Argv's descriptors
// name them (control, then ready): hand them to the child (ExtraFiles)
// and call Started.
func (b *Boot) ChildFiles() []*os.File { return []*os.File{b.ctlR, b.readyW} }

// Started closes the child's ends in this process (the child has its own)
// and begins reading the ready line. Call it once the child is started,
// or after a failed start.
func (b *Boot) Started() {
	b.ctlR.Close()
	b.readyW.Close()
	go func() {
		line, err := bufio.NewReader(b.readyR).ReadString('\n')
		b.readyR.Close()
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ready")
		switch {
		case ok:
			_ = json.Unmarshal([]byte(strings.TrimSpace(rest)), &b.fails)
		case err != nil:
			b.err = errors.New("the warm interpreter exited before it was ready")
		default:
			b.err = fmt.Errorf("the warm interpreter said %q, not ready", line)
		}
		close(b.ready)
	}()
}

// WaitReady waits until the interpreter has imported its preloads. It
// returns the preloads that failed to import (the program's own import
// of them will fail the same way, warm or cold).
func (b *Boot) WaitReady(ctx context.Context) ([]string, error) {
	select {
	case <-b.ready:
		return b.fails, b.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Go hands the interpreter the generation's environment (KEY=VALUE) and
// its working directory ("" keeps the one it was started in); it then
// runs the program. Go or Abandon, once; Go after WaitReady (an
// environment larger than a pipe's buffer blocks until the interpreter
// reads it).
func (b *Boot) Go(env []string, dir string) error {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	msg := map[string]any{"env": m}
	if dir != "" {
		msg["cwd"] = dir
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("warm start: %w", err)
	}
	err = errors.New("warm start: Go after Go or Abandon")
	b.once.Do(func() {
		_, err = b.ctlW.Write(data)
		if cerr := b.ctlW.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = fmt.Errorf("warm start: hand over the environment: %w", err)
		}
	})
	return err
}

// Abandon tells an interpreter that will not run a program to exit (0).
func (b *Boot) Abandon() {
	b.once.Do(func() { b.ctlW.Close() })
}
