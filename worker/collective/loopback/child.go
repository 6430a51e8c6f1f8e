package loopback

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
)

// Task kinds.
const (
	KindVerify = "verify" // AllReduce each of Lengths and check against a plain sum
	KindBench  = "bench"  // time Iters AllReduces of Floats floats after Warmup
	KindLoop   = "loop"   // AllReduce Floats floats until an error, reporting "running" once
)

// Task is what a child is asked to do, once it has reported its address.
type Task struct {
	Kind        string   `json:"kind"`
	Generation  int64    `json:"generation"`
	Rank        int      `json:"rank"`
	Peers       []string `json:"peers"`
	TimeoutMS   int      `json:"timeout_ms"`
	ChunkBytes  int      `json:"chunk_bytes,omitempty"`
	Compression string   `json:"compression,omitempty"`
	Lengths     []int    `json:"lengths,omitempty"`
	Seed        uint64   `json:"seed,omitempty"`
	Floats      int      `json:"floats,omitempty"`
	Warmup      int      `json:"warmup,omitempty"`
	Iters       int      `json:"iters,omitempty"`
}

// Report is a child's answer. Event is "addr" (Addr set), "running" (loop
// started) or "done".
type Report struct {
	Event      string    `json:"event"`
	Rank       int       `json:"rank"`
	Addr       string    `json:"addr,omitempty"`
	Error      string    `json:"error,omitempty"`
	PeerFailed bool      `json:"peer_failed,omitempty"`
	FailedPeer int       `json:"failed_peer,omitempty"`
	MaxAbsErr  []float64 `json:"max_abs_err,omitempty"` // per length, KindVerify
	Digest     []uint64  `json:"digest,omitempty"`      // FNV-64a of each result, KindVerify
	TimesMS    []float64 `json:"times_ms,omitempty"`    // per timed iteration, KindBench
	UserMS     float64   `json:"user_ms,omitempty"`     // process CPU time in user mode over the timed iterations
	SysMS      float64   `json:"sys_ms,omitempty"`      // and in the kernel
	Iterations int       `json:"iterations,omitempty"`  // completed, KindLoop
}

// Serve is a child's whole life: read the job name, listen, report the
// address, run one Task and report. It returns when the task is done.
func Serve(ctx context.Context, in io.Reader, out io.Writer, logger *slog.Logger) error {
	dec := json.NewDecoder(in)
	enc := json.NewEncoder(out)
	var start struct {
		Job string `json:"job"`
	}
	if err := dec.Decode(&start); err != nil {
		return fmt.Errorf("read job: %w", err)
	}
	tr, err := collective.Listen("127.0.0.1:0", start.Job, logger)
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := enc.Encode(Report{Event: "addr", Addr: tr.Addr()}); err != nil {
		return err
	}
	var task Task
	if err := dec.Decode(&task); err != nil {
		return fmt.Errorf("read task: %w", err)
	}
	rep := runTask(ctx, tr, task, enc)
	rep.Event, rep.Rank = "done", task.Rank
	return enc.Encode(rep)
}

func runTask(ctx context.Context, tr *collective.Transport, task Task, enc *json.Encoder) Report {
	comp, err := collective.ParseCompression(task.Compression)
	if err != nil {
		return errReport(err)
	}
	ring, err := tr.NewRing(ctx, collective.RingConfig{
		Compression: comp,
		Generation:  task.Generation,
		Rank:        task.Rank,
		Peers:       task.Peers,
		Timeout:     time.Duration(task.TimeoutMS) * time.Millisecond,
		ChunkBytes:  task.ChunkBytes,
	})
	if err != nil {
		return errReport(err)
	}
	defer ring.Close()
	var rep Report
	switch task.Kind {
	case KindVerify:
		err = verify(ctx, ring, task, &rep)
	case KindBench:
		err = bench(ctx, ring, task, &rep)
	case KindLoop:
		err = loop(ctx, ring, task, enc, &rep)
	default:
		err = fmt.Errorf("unknown task kind %q", task.Kind)
	}
	if err != nil {
		e := errReport(err)
		e.Iterations = rep.Iterations
		return e
	}
	return rep
}

func errReport(err error) Report {
	rep := Report{Error: err.Error()}
	var pe *collective.PeerError
	if errors.As(err, &pe) {
		rep.PeerFailed = errors.Is(err, collective.ErrPeerFailed)
		rep.FailedPeer = pe.Rank
	}
	return rep
}

// Contribution is rank's vector for one verify length: every process can
// rebuild every rank's data, so each checks its own result.
func Contribution(seed uint64, rank, length int) []float32 {
	rng := rand.New(rand.NewPCG(seed, uint64(rank)<<32|uint64(length)))
	v := make([]float32, length)
	for i := range v {
		v[i] = float32(rng.Float64()*2 - 1)
	}
	return v
}

func verify(ctx context.Context, ring *collective.Ring, task Task, rep *Report) error {
	for _, n := range task.Lengths {
		buf := Contribution(task.Seed, ring.Rank(), n)
		if err := ring.AllReduce(ctx, buf); err != nil {
			return err
		}
		want := make([]float64, n)
		for r := range ring.Size() {
			for i, x := range Contribution(task.Seed, r, n) {
				want[i] += float64(x)
			}
		}
		worst := 0.0
		for i := range buf {
			worst = max(worst, abs(float64(buf[i])-want[i]))
		}
		h := fnv.New64a()
		var b [4]byte
		for _, x := range buf {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			h.Write(b[:])
		}
		rep.MaxAbsErr = append(rep.MaxAbsErr, worst)
		rep.Digest = append(rep.Digest, h.Sum64())
	}
	return nil
}

func bench(ctx context.Context, ring *collective.Ring, task Task, rep *Report) error {
	buf := make([]float32, task.Floats)
	for i := range buf {
		buf[i] = float32(i%1000) * 1e-3
	}
	var before syscall.Rusage
	for i := 0; i < task.Warmup+task.Iters; i++ {
		if i == task.Warmup {
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		}
		if err := ring.Barrier(ctx); err != nil {
			return err
		}
		t0 := time.Now()
		if err := ring.AllReduce(ctx, buf); err != nil {
			return err
		}
		if i >= task.Warmup {
			rep.TimesMS = append(rep.TimesMS, float64(time.Since(t0).Nanoseconds())/1e6)
		}
	}
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	rep.UserMS = float64(after.Utime.Nano()-before.Utime.Nano()) / 1e6
	rep.SysMS = float64(after.Stime.Nano()-before.Stime.Nano()) / 1e6
	return nil
}

func loop(ctx context.Context, ring *collective.Ring, task Task, enc *json.Encoder, rep *Report) error {
	buf := make([]float32, task.Floats)
	for {
		if err := ring.AllReduceMean(ctx, buf); err != nil {
			return err
		}
		rep.Iterations++
		if rep.Iterations == 1 {
			if err := enc.Encode(Report{Event: "running", Rank: ring.Rank()}); err != nil {
				return err
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
