package workertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/childproc"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/edl-nomad/edl/worker/trainer"
)

// Cluster runs worker processes of one job against a real Redis.
type Cluster struct {
	t     *testing.T
	R     *testenv.Redis
	Job   string
	Spec  jobs.Spec
	delay time.Duration
	Store string // checkpoint store URL, "" for none
	Jobs  bool   // workers read the spec from, and report to, the job store
	Full  bool   // every switch broadcasts the state to everyone (no direct hand-over)
	Save  string // rank 0 writes the final training state here
	// RunningDelay slows the workers' job store writes to running.
	RunningDelay time.Duration
	Env          []string // more EDL_WORKER_* settings for every worker

	mu    sync.Mutex
	procs map[string]*proc
	next  int
}

type proc struct {
	cmd  *exec.Cmd
	out  *childproc.Buffer // its output, read while it writes
	done chan struct{}
	err  error
}

func TestSpec(epochs, minWorkers int) jobs.Spec {
	return jobs.Spec{
		Name:    "t",
		Workers: jobs.WorkerRange{Min: minWorkers, Max: 16},
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
			Model:        jobs.MLPModel{Hidden: []int{32}},
			Dataset:      jobs.SyntheticDataset{Seed: 7, Samples: 3000, Features: 16, Classes: 4, Partitions: 30},
			Epochs:       epochs,
			BatchSize:    24,
			LearningRate: 0.05,
			Momentum:     0.9,
		}},
	}
}

func NewCluster(t *testing.T, r *testenv.Redis, spec jobs.Spec, delay time.Duration) *Cluster {
	c := &Cluster{t: t, R: r, Job: "job" + testenv.RandomID(3), Spec: spec, delay: delay, procs: map[string]*proc{}}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.procs {
			if p.cmd.Process != nil {
				_ = p.cmd.Process.Kill()
			}
		}
		if t.Failed() {
			for id, p := range c.procs {
				<-p.done
				t.Logf("=== worker %s (exit %v):\n%s", id, p.err, LogTail(p.out.String(), 150, 15))
			}
		}
	})
	return c
}

func Tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogTail is what a failed test shows of a worker's output: its last n
// lines, less the program's per-step lines ("STEP ...") but for the last
// steps of them, so the worker's own log (generations, restores,
// checkpoints) is not pushed out by a few hundred steps.
func LogTail(s string, n, steps int) string {
	lines := strings.Split(s, "\n")
	var keep []string
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "STEP ") || i >= len(lines)-steps {
			keep = append(keep, l)
		}
	}
	return Tail(strings.Join(keep, "\n"), n)
}

// Start launches a new worker process and returns its id.
func (c *Cluster) Start() string {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	id := fmt.Sprintf("w%d", c.next)
	c.mu.Unlock()
	spec, _ := json.Marshal(c.Spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"EDL_WORKER_CHILD=1", "EDL_WORKER_SPEC="+string(spec), "EDL_WORKER_REDIS="+c.R.URL,
		"EDL_WORKER_JOB="+c.Job, "EDL_WORKER_ID="+id, "EDL_WORKER_PREFIX="+c.R.Prefix,
		"EDL_WORKER_DELAY_MS="+strconv.Itoa(int(c.delay.Milliseconds())), "EDL_WORKER_STORE="+c.Store)
	if c.Jobs {
		cmd.Env = append(cmd.Env, "EDL_WORKER_JOBSTORE=1")
	}
	cmd.Env = append(cmd.Env, c.Env...)
	if c.RunningDelay > 0 {
		cmd.Env = append(cmd.Env, "EDL_WORKER_RUNNING_DELAY_MS="+strconv.Itoa(int(c.RunningDelay.Milliseconds())))
	}
	if c.Save != "" {
		cmd.Env = append(cmd.Env, "EDL_WORKER_SAVE="+c.Save)
	}
	if c.Full {
		cmd.Env = append(cmd.Env, "EDL_WORKER_FULL=1")
	}
	p := &proc{cmd: cmd, out: &childproc.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start worker: %v", err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	c.mu.Lock()
	c.procs[id] = p
	c.mu.Unlock()
	return id
}

// Output is what worker id wrote so far (read it after the worker exited).
func (c *Cluster) Output(id string) string {
	c.mu.Lock()
	p := c.procs[id]
	c.mu.Unlock()
	<-p.done
	return p.out.String()
}

// OutputSoFar is what worker id (its program included) wrote up to now.
func (c *Cluster) OutputSoFar(id string) string {
	c.mu.Lock()
	p := c.procs[id]
	c.mu.Unlock()
	return p.out.String()
}

func (c *Cluster) Signal(id string, sig syscall.Signal) {
	c.mu.Lock()
	p := c.procs[id]
	c.mu.Unlock()
	_ = p.cmd.Process.Signal(sig)
}

// Stop sends SIGSTOP to the workers and waits until every thread of each
// is stopped (kill returns before the signal takes effect).
func (c *Cluster) Stop(ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		c.Signal(id, syscall.SIGSTOP)
	}
	for _, id := range ids {
		c.mu.Lock()
		pid := c.procs[id].cmd.Process.Pid
		c.mu.Unlock()
		c.WaitFor(fmt.Sprintf("worker %s (pid %d) stopped", id, pid), 10*time.Second, func() bool { return allStopped(pid) })
	}
}

// allStopped reports whether every thread of pid is stopped (state T or t),
// from /proc/PID/task/*/stat.
func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// "pid (comm) S ...": the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Wait waits for worker id to exit and returns its error.
func (c *Cluster) Wait(id string, timeout time.Duration) error {
	c.mu.Lock()
	p := c.procs[id]
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("worker %s still running after %s", id, timeout)
	}
}

func (c *Cluster) Coord() *coord.Client {
	cc, err := coord.New(c.R.Client, coord.Config{Prefix: c.R.Prefix, Job: c.Job, Worker: "test", Lease: time.Second, Heartbeat: 100 * time.Millisecond}, TestLog(c.t))
	if err != nil {
		c.t.Fatal(err)
	}
	return cc
}

// Gen returns the current generation (nil before the first).
func (c *Cluster) Gen() *coord.Generation {
	g, err := c.Coord().ReadGen(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return g
}

// WaitFor polls cond until it holds.
func (c *Cluster) WaitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitWorld waits until the current generation has n members and has
// applied steps past the given one.
func (c *Cluster) WaitWorld(n int, timeout time.Duration) {
	c.t.Helper()
	c.WaitFor(fmt.Sprintf("a generation of %d", n), timeout, func() bool {
		g := c.Gen()
		return g != nil && len(g.Members) == n
	})
}

// Steps returns the highest applied step in the debug records.
func (c *Cluster) Steps() int64 {
	recs, err := datapipe.New(c.R.Client, c.Coord().Keys(), "test").DebugRecords(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	var m int64 = -1
	for s := range recs {
		m = max(m, s)
	}
	return m
}

// WaitSteps waits until k more steps were applied.
func (c *Cluster) WaitSteps(k int64, timeout time.Duration) {
	c.t.Helper()
	from := c.Steps()
	c.WaitFor(fmt.Sprintf("%d more steps after %d", k, from), timeout, func() bool { return c.Steps() >= from+k })
}

// Finish waits for every worker to exit 0 and the job to be done.
func (c *Cluster) Finish(timeout time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	ids := make([]string, 0, len(c.procs))
	for id := range c.procs {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	sort.Strings(ids)
	for _, id := range ids {
		if err := c.Wait(id, timeout); err != nil && !c.killed(id) {
			c.t.Errorf("worker %s: %v", id, err)
		}
	}
	done, err := c.Coord().Done(context.Background())
	if err != nil || !done {
		c.t.Fatalf("job not done after all workers exited (err %v)", err)
	}
}

func (c *Cluster) killed(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[id]
	if p.cmd.ProcessState == nil {
		return false
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// CheckExactlyOnce checks, from the debug records, that every sample of
// every epoch went into exactly one applied step.
func (c *Cluster) CheckExactlyOnce() {
	c.t.Helper()
	recs, err := datapipe.New(c.R.Client, c.Coord().Keys(), "test").DebugRecords(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	b := c.Spec.Trainer.Builtin
	missed, repeated, err := core.CheckSamples(recs, b.Dataset, b.Epochs)
	if err != nil {
		c.t.Fatal(err)
	}
	if missed != 0 || repeated != 0 {
		c.t.Errorf("exactly once violated: %d samples missed, %d repeated over %d steps", missed, repeated, len(recs))
		c.t.Logf("per partition: %s", sampleGaps(recs, b.Dataset, b.Epochs))
	}
	c.t.Logf("exactly once: %d applied steps, %d epochs x %d samples checked", len(recs), b.Epochs, b.Dataset.Samples)
}

// sampleGaps lists, for diagnosis, the epoch/partition ranges of the debug
// records that are not contiguous from 0 (a gap or an overlap), with the steps.
func sampleGaps(recs map[int64]string, ds jobs.SyntheticDataset, epochs int) string {
	data, err := trainer.NewDataset(ds)
	if err != nil {
		return err.Error()
	}
	type use struct {
		step, s, e int64
	}
	type key struct{ epoch, part int }
	uses := map[key][]use{}
	for step, payload := range recs {
		ep, rest, _ := strings.Cut(payload, "|")
		epoch, _ := strconv.Atoi(ep)
		for _, seg := range strings.Split(rest, ",") {
			var p int
			var s, e int64
			if _, err := fmt.Sscanf(seg, "%d:%d:%d", &p, &s, &e); err == nil {
				uses[key{epoch, p}] = append(uses[key{epoch, p}], use{step, s, e})
			}
		}
	}
	var out []string
	for e := range epochs {
		for p := range data.NumPartitions() {
			if _, ok := uses[key{e, p}]; !ok {
				out = append(out, fmt.Sprintf("epoch %d part %d: unused", e, p))
			}
		}
	}
	for k, us := range uses {
		sort.Slice(us, func(i, j int) bool { return us[i].s < us[j].s })
		var pos int64
		bad := false
		for _, u := range us {
			if u.s != pos {
				bad = true
			}
			pos = u.e
		}
		if _, n := data.Partition(k.part); pos != n {
			bad = true
		}
		if bad {
			out = append(out, fmt.Sprintf("epoch %d part %d: %v", k.epoch, k.part, us))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// LeaderID returns the worker holding the leader lease.
func (c *Cluster) LeaderID() string {
	id, _ := c.R.Client.Get(t0ctx, c.Coord().Keys().Leader()).Result()
	return id
}

func (c *Cluster) LiveDir() string {
	for _, e := range c.Env {
		if d, ok := strings.CutPrefix(e, "EDL_WORKER_LIVEDIR="); ok {
			return d
		}
	}
	return ""
}

// CheckLiveExactlyOnce is checkExactlyOnce for a live job's data set.
func (c *Cluster) CheckLiveExactlyOnce(samples int64, parts, epochs int) {
	c.t.Helper()
	recs, err := datapipeRecords(c)
	if err != nil {
		c.t.Fatal(err)
	}
	missed, repeated, err := core.CheckLiveSamples(recs, samples, parts, epochs)
	if err != nil {
		c.t.Fatal(err)
	}
	if missed != 0 || repeated != 0 || len(recs) == 0 {
		c.t.Errorf("samples missed %d, repeated %d over %d applied steps; want 0 and 0", missed, repeated, len(recs))
	}
}

// WaitLonePartition waits until epoch's queue is empty and exactly one of
// its partitions is unfinished, with minOff..maxOff samples used (so the
// others had time to find the queue empty), and returns the worker holding it.
func (c *Cluster) WaitLonePartition(epoch int, minOff, maxOff int64, timeout time.Duration) string {
	c.t.Helper()
	keys := c.Coord().Keys()
	var holder string
	c.WaitFor("one worker holding the last partition", timeout, func() bool {
		ctx := context.Background()
		if n, err := c.R.Client.LLen(ctx, keys.Todo(epoch)).Result(); err != nil || n != 0 {
			return false
		}
		parts, err := c.R.Client.HGetAll(ctx, keys.Parts(epoch)).Result()
		if err != nil || len(parts) != c.Spec.Trainer.Builtin.Dataset.Partitions {
			return false
		}
		open := 0
		for _, rec := range parts {
			f := strings.Split(rec, "|")
			if len(f) != 7 || f[3] != "0" {
				continue
			}
			open++
			holder = f[0]
			if off, err := strconv.ParseInt(f[1], 10, 64); err != nil || off < minOff || off > maxOff || holder == "" {
				return false
			}
		}
		return open == 1
	})
	return holder
}

var t0ctx = context.Background()

func datapipeRecords(c *Cluster) (map[int64]string, error) {
	return datapipe.New(c.R.Client, c.Coord().Keys(), "test").DebugRecords(context.Background())
}

// NewestCheckpoint is the step of the cluster's job's newest committed
// checkpoint in its store (c.Store), -1 when there is none or the store
// cannot be read.
func (c *Cluster) NewestCheckpoint() int64 {
	store, err := checkpoint.Open(context.Background(), c.Store, checkpoint.Options{})
	if err != nil {
		return -1
	}
	ms, err := checkpoint.List(context.Background(), store, core.CheckpointJob(c.Job))
	if err != nil || len(ms) == 0 {
		return -1
	}
	return ms[len(ms)-1].Step
}

// PartitionRanges reads debug records (step -> "epoch|p:start:end,..."):
// per epoch and partition, the [start, end) ranges of its applied steps,
// sorted by start.
func PartitionRanges(recs map[int64]string) (map[[2]int][][2]int64, error) {
	out := map[[2]int][][2]int64{}
	for step, payload := range recs {
		ep, rest, _ := strings.Cut(payload, "|")
		epoch, err := strconv.Atoi(ep)
		if err != nil {
			return nil, fmt.Errorf("step %d: bad record %q", step, payload)
		}
		for _, seg := range strings.Split(rest, ",") {
			var p int
			var s, e int64
			if _, err := fmt.Sscanf(seg, "%d:%d:%d", &p, &s, &e); err == nil {
				out[[2]int{epoch, p}] = append(out[[2]int{epoch, p}], [2]int64{s, e})
			}
		}
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	}
	return out, nil
}
