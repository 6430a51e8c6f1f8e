package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker"
	"github.com/redis/go-redis/v9"
)

// execFlags are `edl worker`'s flags for exec mode (trainer.kind "exec").
type execFlags struct {
	dir        string
	masterPort int
	tailLines  int
	// live mode (trainer.exec.mode "live", docs/live.md)
	liveTimeout time.Duration
}

// MasterPortLabel is the Nomad network port label of rank 0's rendezvous
// port: the task sees it as NOMAD_PORT_master.
const MasterPortLabel = "master"

func addExecFlags(fs *flag.FlagSet, f *execFlags) {
	fs.StringVar(&f.dir, "exec-dir", "", "exec mode: this worker's folder; the program's EDL_CHECKPOINT_DIR is <exec-dir>/checkpoint (default: $NOMAD_TASK_DIR/edl-exec on Nomad, else a temporary folder removed at exit)")
	port := 0
	if v := os.Getenv("NOMAD_PORT_" + MasterPortLabel); v != "" {
		port, _ = strconv.Atoi(v)
	}
	fs.IntVar(&f.masterPort, "master-port", port, "exec mode: the port reserved for rank 0's rendezvous store (MASTER_PORT); 0: a free port per generation (default: $NOMAD_PORT_"+MasterPortLabel+" when set)")
	fs.IntVar(&f.tailLines, "exec-tail-lines", 20, "exec mode: lines of the program's stderr kept for a failed job's reason")
	fs.DurationVar(&f.liveTimeout, "live-timeout", 5*time.Second, "live mode: bound on the program's collectives and process-group setup: a dead or frozen peer fails the step on every survivor within it")
}

// jobSpec returns the job's spec: the --spec file's, else the job store's
// (retried briefly: Redis may be starting).
func jobSpec(ctx context.Context, fileSpec *jobs.Spec, rdb redis.UniversalClient, prefix, job string) (*jobs.Spec, error) {
	if fileSpec != nil {
		return fileSpec, nil
	}
	st := jobstore.New(rdb, jobstore.Config{Prefix: prefix})
	var last error
	for range 20 {
		j, err := st.Get(ctx, job)
		if err == nil {
			return &j.Spec, nil
		}
		if errors.Is(err, jobs.ErrNotFound) {
			return nil, fmt.Errorf("worker: job %s: %w", job, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("worker: read job %s: %w", job, last)
}

// execHost is the address the other workers reach this one at: the host
// of --advertise, else of --listen when it names one, else 127.0.0.1.
func execHost(advertise, listen string) string {
	for _, a := range []string{advertise, listen} {
		if a == "" {
			continue
		}
		h := a
		if hh, _, err := net.SplitHostPort(a); err == nil {
			h = hh
		}
		if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
			return h
		}
	}
	return "127.0.0.1"
}

// runExecWorker runs the worker in exec mode: the user's program with
// torchrun's environment, restarted at every generation change.
func runExecWorker(ctx context.Context, cfg worker.Config, deps worker.Deps, f execFlags, storeURL, advertise, listen string,
	stdout, stderr io.Writer, log *slog.Logger) error {
	dir := f.dir
	if dir == "" {
		if td := os.Getenv("NOMAD_TASK_DIR"); td != "" {
			dir = td + "/edl-exec"
		} else {
			tmp, err := os.MkdirTemp("", "edl-exec-"+cfg.Job+"-")
			if err != nil {
				return fmt.Errorf("worker: --exec-dir: %w", err)
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
	}
	if storeURL != "" {
		st, err := checkpoint.Open(ctx, storeURL, checkpoint.OptionsFromEnv(os.Getenv))
		if err != nil {
			return fmt.Errorf("worker: --store: %w", err)
		}
		deps.Store = st
	}
	if f.liveTimeout <= 0 {
		return usageErrorf("worker: --live-timeout %s: want a positive duration", f.liveTimeout)
	}
	ecfg := worker.ExecConfig{Dir: dir, Host: execHost(advertise, listen), MasterPort: f.masterPort,
		Env: os.Environ(), Stdout: stdout, Stderr: stderr, TailLines: f.tailLines, LiveTimeout: f.liveTimeout}
	w, err := worker.NewExec(cfg, ecfg, deps)
	if err != nil {
		return usageErrorf("worker: %v", err)
	}
	log.Debug("exec mode", "dir", dir, "host", ecfg.Host, "master_port", f.masterPort)
	return w.Run(ctx)
}
