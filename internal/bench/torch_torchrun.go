package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/internal/freeport"
)

// The torchrun system of `edl bench torch` (the script under torchrun,
// c10d rendezvous), and the edl-live lines (benchTorchLive,
// torch_live.go) on the same worlds.

// childPIDs lists the processes whose parent is pid (from /proc).
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			if pp, _ := strconv.Atoi(f[1]); pp == pid {
				out = append(out, n)
			}
		}
	}
	sort.Ints(out)
	return out
}

// ---- torchrun ----

type torchAgent struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (b *torchBench) startAgent(ctx context.Context, runDir, name string, port int, host bool, log *stepLog) (*torchAgent, error) {
	args := []string{"-m", "torch.distributed.run", "--nnodes=2:3", "--nproc_per_node=1",
		"--rdzv_backend=c10d", fmt.Sprintf("--rdzv_endpoint=127.0.0.1:%d", port), "--rdzv_id=edl-bench",
		fmt.Sprintf("--rdzv_conf=last_call_timeout=1,join_timeout=60,is_host=%t", host),
		"--monitor_interval=1", "--max_restarts=10"}
	if b.pythonTeeNeeded {
		args = append(args, "--redirects=1", "--tee=1", "--log_dir="+filepath.Join(runDir, name+"-logs"))
	}
	args = append(args, b.script, "--steps=1000000", fmt.Sprintf("--ckpt-every=%d", b.ckptEvery))
	args = append(args, b.scriptArgs...)
	cmd := exec.Command(b.python, args...)
	cmd.Env = append(os.Environ(), "EDL_CHECKPOINT_DIR="+filepath.Join(runDir, "checkpoint"), "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := os.Create(filepath.Join(runDir, name+".out"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = out
	pr, err := cmd.StdoutPipe()
	if err != nil {
		out.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start torchrun agent %s: %w", name, err)
	}
	a := &torchAgent{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		log.scan(name, pr, out)
		_ = cmd.Wait()
		out.Close()
		close(a.done)
	}()
	return a, nil
}

// stop ends the agent's process group: SIGTERM, SIGKILL after 10 s.
func (a *torchAgent) stop() {
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
}

func (b *torchBench) runTorchrun(ctx context.Context, scenario string) (torchResult, error) {
	runDir := filepath.Join(b.dir, "torchrun-"+scenario)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return torchResult{}, err
	}
	port, err := freeport.Loopback()
	if err != nil {
		return torchResult{}, err
	}
	log := newStepLog()
	var agents []*torchAgent
	defer func() {
		for _, a := range agents {
			a.stop()
		}
	}()
	start := func(name string) error {
		a, err := b.startAgent(ctx, runDir, name, port, len(agents) == 0, log)
		if err != nil {
			return err
		}
		agents = append(agents, a)
		return nil
	}
	initial := []string{"a", "b"}
	workers := "2->3"
	if scenario != "scale_out" {
		initial, workers = []string{"a", "b", "c"}, "3->2"
	}
	if scenario == "failure" {
		workers = "3 (one killed)"
	}
	for _, n := range initial {
		if err := start(n); err != nil {
			return torchResult{}, err
		}
	}
	fmt.Fprintf(b.log, "bench torch: torchrun %s: %d agents started, warming up\n", scenario, len(initial))
	if err := waitFor(ctx, b.timeout, "the first steps", warmedUp(log, initial, b.warmup)); err != nil {
		return torchResult{}, err
	}
	event := unixNow()
	exclude := map[string]bool{}
	switch scenario {
	case "scale_out":
		if err := start("c"); err != nil {
			return torchResult{}, err
		}
	case "scale_in":
		// The last agent leaves: SIGTERM to the agent, which stops its
		// worker; c10d keeps the rendezvous open for the others.
		_ = agents[2].cmd.Process.Signal(syscall.SIGTERM)
		exclude["c"] = true
	case "failure":
		kids := childPIDs(agents[2].cmd.Process.Pid)
		if len(kids) == 0 {
			return torchResult{}, errors.New("agent c has no worker process to kill")
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		exclude["c"] = true
	}
	survivors := []string{"a", "b"}
	fmt.Fprintf(b.log, "bench torch: torchrun %s: event sent, waiting for the restart\n", scenario)
	werr := waitFor(ctx, b.timeout, "the survivors to restart and train", doneAfter(log, survivors, event, b.after))
	f := analyzeSteps(log.snapshot(), event, exclude)
	if werr != nil && f.survivors == 0 {
		return torchResult{}, werr
	}
	return torchResult{System: "torchrun", Scenario: scenario, StallS: f.stall, StepsRedone: f.redone,
		Workers: workers, Survivors: f.survivors, Restarted: f.restarted && werr == nil}, nil
}

// runEdlLive measures one scenario of live mode (torch_live.go) on the
// same worlds as the other systems: scale_out 2->3, scale_in 3->2, failure
// (one of 3 SIGKILLed).
func (b *torchBench) runEdlLive(ctx context.Context, script, sc string) (torchResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return torchResult{}, err
	}
	ev, world, workers := map[string]string{"scale_out": "join", "scale_in": "leave", "failure": "kill"}[sc], 3, "3->2"
	if sc == "scale_out" {
		world, workers = 2, "2->3"
	}
	line, err := benchTorchLive(ctx, liveBenchConfig{Exe: exe, Python: b.python, Script: script, Scenario: ev, Workers: world,
		Args: []string{"--batch", "48", "--hidden", "1024,1024,256"}, Timeout: b.timeout})
	if err != nil {
		return torchResult{}, err
	}
	survivors := world
	if sc != "scale_out" {
		survivors--
	}
	return torchResult{System: "edl-live", Scenario: sc, StallS: math.Round(line.StallS*1000) / 1000, StepsRedone: line.StepsRedone, Workers: workers,
		Survivors: survivors, SamplesMissed: &line.SamplesMissed, SamplesRepeated: &line.SamplesRepeated}, nil
}
