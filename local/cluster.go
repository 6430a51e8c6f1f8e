package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// Config sets up the local cluster. Command and WorkerArgs are required.
type Config struct {
	// Command starts one worker: argv[0] and the leading arguments, e.g.
	// ["/usr/local/bin/edl", "worker"].
	Command []string
	// WorkerArgs are the per-worker arguments appended to Command.
	WorkerArgs func(job jobs.Job, index int, workerID string) []string
	// Env is added to this process's environment for every worker.
	Env []string
	// RedisAuth, when set, is the Redis login of a job's workers (the
	// planner's per-job ACL user): each worker gets EDL_REDIS_USER and the
	// password in a mode-0600 file named by EDL_REDIS_PASSWORD_FILE, which
	// it reads and removes at start (never on its command line).
	RedisAuth func(jobID string) (user, password string)
	// LogDir holds each worker's stdout and stderr, apart:
	// LogDir/<job>/<workerID>.stdout.log and .stderr.log (logs.go).
	LogDir string
	// LogMaxBytes is the size at which a worker's log file is rotated
	// (default 16 MiB); LogKeep is how many files of each stream are kept,
	// the current one included (default 2).
	LogMaxBytes int64
	LogKeep     int
	// Slots is how many CPU-only workers fit at once; default: the cores.
	Slots int
	// GPUs are this machine's GPUs (DiscoverGPUs); nil means CPU only.
	GPUs []GPU
	// Grace is how long a stopped worker has between SIGTERM and SIGKILL.
	Grace time.Duration
	// RestartDelay is the pause before a failed worker is restarted.
	RestartDelay time.Duration
	// JobDir, when set, names a folder of the job's (edl dev: its programs'
	// exec folders, each with a copy of the job's checkpoint) that is
	// removed once the job is forgotten: torn down or scaled to 0, and its
	// workers all gone. Worker IDs are never reused, so nothing reads it
	// again (a later worker restores from the checkpoint store).
	JobDir func(jobID string) string
	// Now reads the clock (tests may fix it); default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultConfig fills what a zero Config leaves out.
func DefaultConfig() Config {
	return Config{Slots: runtime.NumCPU(), Grace: 30 * time.Second, RestartDelay: time.Second, Now: time.Now,
		LogMaxBytes: DefaultLogMaxBytes, LogKeep: DefaultLogKeep}
}

// Validate names the field at fault.
func (c Config) Validate() error {
	switch {
	case len(c.Command) == 0:
		return errors.New("local: Command is empty")
	case c.WorkerArgs == nil:
		return errors.New("local: WorkerArgs is nil")
	case c.LogDir == "":
		return errors.New("local: LogDir is empty")
	case c.Slots < 0:
		return fmt.Errorf("local: Slots = %d, want >= 0", c.Slots)
	case c.Grace <= 0:
		return fmt.Errorf("local: Grace = %s, want > 0", c.Grace)
	case c.LogMaxBytes < 0:
		return fmt.Errorf("local: LogMaxBytes = %d, want >= 0 (0: the default)", c.LogMaxBytes)
	case c.LogKeep < 0:
		return fmt.Errorf("local: LogKeep = %d, want >= 0 (0: the default)", c.LogKeep)
	}
	return nil
}

// Cluster runs workers as child processes of this one.
type Cluster struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	jobs map[string]*jobRun
	seq  int
	// usedGPUs maps a GPU UUID to the worker holding it.
	usedGPUs map[string]string
	closed   bool
	wg       sync.WaitGroup
	// authDir (mode 0700, made on first use) holds the workers' Redis
	// password files until they read them.
	authDir string
}

type jobRun struct {
	job     jobs.Job
	desired int
	// version grows with every change of desired; a worker that exited 0
	// keeps its place until the next change, as in Nomad.
	version int
	procs   map[string]*proc // by worker ID, including finished ones
}

type proc struct {
	id       string
	index    int
	state    jobs.WorkerState
	cmd      *exec.Cmd
	gpus     []string
	stopping bool
	replace  bool // start a new worker at this index when this one is gone
	done     chan struct{}
	exitCode int
	started  time.Time
	version  int
	// interrupted: Close stopped it, not its job (edl dev stopped); its
	// exit record says so, and it is no worker of the job after a restart.
	interrupted bool
	// left: it went while its job went on (drained by a scale-down,
	// replaced, or failed and restarted); its exit record says so, and it
	// is no worker of the job after a restart either.
	left bool
}

// New returns a cluster with no workers.
func New(cfg Config) (*Cluster, error) {
	d := DefaultConfig()
	cfg.Slots = cmp.Or(cfg.Slots, d.Slots)
	cfg.Grace = cmp.Or(cfg.Grace, d.Grace)
	cfg.RestartDelay = cmp.Or(cfg.RestartDelay, d.RestartDelay)
	cfg.LogMaxBytes = cmp.Or(cfg.LogMaxBytes, d.LogMaxBytes)
	cfg.LogKeep = cmp.Or(cfg.LogKeep, d.LogKeep)
	if cfg.Now == nil {
		cfg.Now = d.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Cluster{cfg: cfg, log: cfg.Logger.With("component", "local"), jobs: map[string]*jobRun{}, usedGPUs: map[string]string{}}, nil
}

// Capacity reports this machine as one node.
func (c *Cluster) Capacity(ctx context.Context) (jobs.Capacity, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	host, _ := os.Hostname()
	n := jobs.Node{ID: "local", Name: host, CPUSlots: c.cfg.Slots, GPUs: len(c.cfg.GPUs)}
	if len(c.cfg.GPUs) > 0 {
		n.Class = jobs.GPUClass{Model: c.cfg.GPUs[0].Model, MemoryMiB: c.cfg.GPUs[0].MemoryMiB}
	}
	n.FreeGPUs = n.GPUs - len(c.usedGPUs)
	n.FreeCPUSlots = n.CPUSlots - c.cpuWorkersLocked()
	return jobs.Capacity{Nodes: []jobs.Node{n}}, nil
}

func (c *Cluster) cpuWorkersLocked() int {
	used := 0
	for _, jr := range c.jobs {
		if jr.job.Spec.GPUsPerWorker > 0 {
			continue
		}
		for _, p := range jr.procs {
			if p.cmd != nil && p.state.Live() {
				used++
			}
		}
	}
	return used
}

// Workers lists a job's workers, finished ones included, by index; once
// the job is torn down and its workers gone, from their logs and exit
// records (logs_workers.go).
func (c *Cluster) Workers(ctx context.Context, jobID string) ([]jobs.Worker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	jr := c.jobs[jobID]
	if jr == nil {
		return c.finishedWorkers(jobID)
	}
	out := make([]jobs.Worker, 0, len(jr.procs))
	for _, p := range jr.procs {
		w := jobs.Worker{ID: p.id, JobID: jobID, Index: p.index, Node: "local", State: p.state, GPUs: append([]string(nil), p.gpus...)}
		if p.cmd != nil {
			w.Started = p.started
		}
		if p.state == jobs.WorkerComplete || p.state == jobs.WorkerFailed {
			code := p.exitCode
			w.ExitCode = &code
		}
		out = append(out, w)
	}
	sortWorkers(out)
	return out, nil
}

// Scale makes count workers of job run: new ones at the lowest free
// indexes, excess ones stopped from the highest index. Idempotent.
func (c *Cluster) Scale(ctx context.Context, job jobs.Job, count int, reason string) error {
	if count < 0 {
		return fmt.Errorf("scale %s: count %d < 0", job.ID, count)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("scale %s: local cluster closed", job.ID)
	}
	jr := c.jobs[job.ID]
	if jr == nil {
		jr = &jobRun{procs: map[string]*proc{}}
		c.jobs[job.ID] = jr
		// A job this process has not run may have run before it (edl dev
		// restarted): its new workers' IDs come after its old ones'.
		c.seq = max(c.seq, c.lastSeq(job.ID))
	}
	jr.job = job
	if jr.desired != count {
		c.log.Info("scale", "job", job.ID, "from", jr.desired, "to", count, "reason", reason)
		jr.version++
	}
	jr.desired = count
	c.reconcileLocked(jr)
	return nil
}

// StopWorker stops one worker (SIGTERM, then SIGKILL after the grace period)
// and places a replacement at the same index once it is gone, as Nomad does
// when an allocation is stopped.
func (c *Cluster) StopWorker(ctx context.Context, jobID, workerID, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	jr := c.jobs[jobID]
	if jr == nil || jr.procs[workerID] == nil {
		return fmt.Errorf("stop worker %s of %s: %w", workerID, jobID, ErrUnknownWorker)
	}
	p := jr.procs[workerID]
	if !p.state.Live() {
		return nil
	}
	c.log.Info("stop worker", "job", jobID, "worker", workerID, "reason", reason)
	p.replace, p.left = true, true
	c.stopLocked(p)
	return nil
}

// ErrUnknownWorker means no such worker runs in this cluster.
var ErrUnknownWorker = errors.New("unknown worker")

// Teardown stops every worker of the job and forgets it once they are gone.
func (c *Cluster) Teardown(ctx context.Context, jobID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	jr := c.jobs[jobID]
	if jr == nil {
		return nil
	}
	jr.desired = 0
	for _, p := range jr.procs {
		p.replace = false
		c.stopLocked(p)
	}
	if !c.anyLiveLocked(jr) {
		c.forgetLocked(jobID)
	}
	return nil
}

// Close stops every worker and waits for them, up to ctx.
func (c *Cluster) Close(ctx context.Context) error {
	defer func() {
		c.mu.Lock()
		if c.authDir != "" {
			_ = os.RemoveAll(c.authDir)
		}
		c.mu.Unlock()
	}()
	c.mu.Lock()
	c.closed = true
	for _, jr := range c.jobs {
		jr.desired = 0
		for _, p := range jr.procs {
			p.replace = false
			if p.state.Live() && !p.stopping {
				p.interrupted = true
			}
			c.stopLocked(p)
		}
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		for _, jr := range c.jobs {
			for _, p := range jr.procs {
				if p.cmd != nil && p.state.Live() {
					_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				}
			}
		}
		c.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

func (c *Cluster) anyLiveLocked(jr *jobRun) bool {
	for _, p := range jr.procs {
		if p.state.Live() {
			return true
		}
	}
	return false
}

// reconcileLocked starts or stops workers so that desired ones run.
func (c *Cluster) reconcileLocked(jr *jobRun) {
	var live []*proc
	used := map[int]bool{}
	completed := 0
	for _, p := range jr.procs {
		if p.state == jobs.WorkerComplete && p.version == jr.version && !p.replace {
			completed++
		}
		if p.state.Live() {
			used[p.index] = true
			if !p.stopping {
				live = append(live, p)
			}
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].index > live[j].index })
	for i := 0; i < len(live)-jr.desired; i++ {
		live[i].replace = false
		live[i].left = true
		c.stopLocked(live[i])
	}
	for n := len(live) + completed; n < jr.desired; n++ {
		idx := 0
		for used[idx] {
			idx++
		}
		used[idx] = true
		if !c.startLocked(jr, idx) {
			return // no room now; a worker's exit calls reconcile again
		}
	}
}

// startLocked launches a worker at index, if a slot or GPUs are free.
func (c *Cluster) startLocked(jr *jobRun, index int) bool {
	gpus, ok := c.takeResourcesLocked(jr.job.Spec.GPUsPerWorker)
	if !ok {
		return false
	}
	c.seq++
	id := fmt.Sprintf("%s-w%d-%d", jr.job.ID, index, c.seq)
	p := &proc{id: id, index: index, state: jobs.WorkerRunning, gpus: gpus, done: make(chan struct{}), started: c.cfg.Now(), version: jr.version}
	for _, g := range gpus {
		c.usedGPUs[g] = id
	}
	args := append(append([]string(nil), c.cfg.Command[1:]...), c.cfg.WorkerArgs(jr.job, index, id)...)
	cmd := exec.Command(c.cfg.Command[0], args...)
	cmd.Env = append(append(os.Environ(), c.cfg.Env...),
		"CUDA_VISIBLE_DEVICES="+strings.Join(gpus, ","),
		"NVIDIA_VISIBLE_DEVICES="+strings.Join(gpus, ","),
		fmt.Sprintf("EDL_WORKER_INDEX=%d", index))
	if len(gpus) == 0 {
		cmd.Env = append(cmd.Env, "NVIDIA_VISIBLE_DEVICES=void")
	}
	if c.cfg.RedisAuth != nil {
		env, err := c.authFileLocked(jr.job.ID, id)
		if err != nil {
			c.log.Error("worker redis login", "job", jr.job.ID, "err", err)
			c.releaseLocked(p)
			return false
		}
		cmd.Env = append(cmd.Env, env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, stderr, err := c.workerLogs(jr.job.ID, id)
	if err != nil {
		c.log.Error("worker log", "job", jr.job.ID, "err", err)
		c.releaseLocked(p)
		return false
	}
	logs := closers{stdout, stderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The output is copied through pipes: do not let a grandchild that
	// keeps them open hold up the worker's exit.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		logs.Close()
		c.log.Error("start worker", "job", jr.job.ID, "index", index, "err", err)
		p.state, p.exitCode = jobs.WorkerFailed, -1 // never ran
		c.releaseLocked(p)
		jr.procs[id] = p
		close(p.done)
		return false
	}
	p.cmd = cmd
	jr.procs[id] = p
	c.log.Info("worker started", "job", jr.job.ID, "worker", id, "index", index, "pid", cmd.Process.Pid, "gpus", gpus)
	c.wg.Add(1)
	go c.wait(jr.job.ID, p, logs)
	return true
}

func (c *Cluster) takeResourcesLocked(n int) ([]string, bool) {
	if n == 0 {
		return nil, c.cpuWorkersLocked() < c.cfg.Slots
	}
	var got []string
	for _, g := range c.cfg.GPUs {
		if _, used := c.usedGPUs[g.UUID]; !used {
			got = append(got, g.UUID)
			if len(got) == n {
				return got, true
			}
		}
	}
	return nil, false
}

func (c *Cluster) releaseLocked(p *proc) {
	for _, g := range p.gpus {
		if c.usedGPUs[g] == p.id {
			delete(c.usedGPUs, g)
		}
	}
}

// stopLocked sends SIGTERM now and SIGKILL after the grace period.
func (c *Cluster) stopLocked(p *proc) {
	if p.cmd == nil || !p.state.Live() || p.stopping {
		return
	}
	p.stopping = true
	p.state = jobs.WorkerStopping
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(c.cfg.Grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
}

// wait records a worker's exit and lets the job's other workers take its place.
func (c *Cluster) wait(jobID string, p *proc, logs io.Closer) {
	defer c.wg.Done()
	err := p.cmd.Wait()
	logs.Close()
	c.removeAuthFile(p.id)
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	c.mu.Lock()
	interrupted := p.interrupted
	// A failed worker its cluster restarts (wait's restart below) left a
	// job that goes on.
	left := p.left || p.replace || (code != 0 && !p.stopping && !c.closed && c.jobs[jobID] != nil)
	c.mu.Unlock()
	c.recordExit(jobID, p, code, interrupted, left)
	c.mu.Lock()
	defer c.mu.Unlock()
	p.exitCode = code
	if code == 0 {
		p.state = jobs.WorkerComplete
	} else {
		p.state = jobs.WorkerFailed
	}
	close(p.done)
	c.releaseLocked(p)
	c.log.Info("worker exited", "job", jobID, "worker", p.id, "code", code, "stopping", p.stopping)
	jr := c.jobs[jobID]
	if jr == nil {
		return
	}
	restart := p.replace || (code != 0 && !p.stopping)
	if c.closed {
		restart = false
	}
	if restart {
		// A failed worker comes back after a pause, like Nomad's restart policy.
		delay := c.cfg.RestartDelay
		if p.replace {
			delay = 0
		}
		go func() {
			time.Sleep(delay)
			c.mu.Lock()
			defer c.mu.Unlock()
			if jr := c.jobs[jobID]; jr != nil && !c.closed {
				c.reconcileLocked(jr)
			}
		}()
	}
	// Freed resources may let this job's (or another's) blocked workers start.
	for _, other := range c.jobs {
		if other != jr || !restart {
			c.reconcileLocked(other)
		}
	}
	if jr.desired == 0 && !c.anyLiveLocked(jr) {
		c.forgetLocked(jobID)
	}
}

// forgetLocked drops a job whose workers are all gone, and its folder
// (Config.JobDir).
func (c *Cluster) forgetLocked(jobID string) {
	delete(c.jobs, jobID)
	if c.cfg.JobDir == nil {
		return
	}
	if dir := c.cfg.JobDir(jobID); dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			c.log.Warn("remove the job's folder", "job", jobID, "dir", dir, "err", err)
		}
	}
}

// authFileLocked writes the job's Redis password for worker id and returns
// the variables that name it.
func (c *Cluster) authFileLocked(jobID, id string) ([]string, error) {
	user, pass := c.cfg.RedisAuth(jobID)
	if c.authDir == "" {
		d, err := os.MkdirTemp("", "edl-worker-auth-")
		if err != nil {
			return nil, err
		}
		c.authDir = d
	}
	f := filepath.Join(c.authDir, id)
	if err := os.WriteFile(f, []byte(pass), 0o600); err != nil {
		return nil, err
	}
	return []string{"EDL_REDIS_USER=" + user, "EDL_REDIS_PASSWORD_FILE=" + f}, nil
}

// removeAuthFile removes a worker's password file if it did not.
func (c *Cluster) removeAuthFile(id string) {
	c.mu.Lock()
	dir := c.authDir
	c.mu.Unlock()
	if dir != "" {
		_ = os.Remove(filepath.Join(dir, id))
	}
}

// sortWorkers orders workers by index, then ID: the order Workers lists
// them in, whoever reads them.
func sortWorkers(ws []jobs.Worker) {
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Index != ws[j].Index {
			return ws[i].Index < ws[j].Index
		}
		return ws[i].ID < ws[j].ID
	})
}
