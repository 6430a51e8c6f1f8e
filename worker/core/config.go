package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/collective"
)

// JobSource is the part of the job store a worker needs. Calls happen off
// the step loop.
type JobSource interface {
	Get(ctx context.Context, id string) (jobs.Job, error)
	SetProgress(ctx context.Context, id string, p jobs.Progress) error
	AppendEvent(ctx context.Context, id string, e jobs.Event) (jobs.Event, error)
	Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error)
	SetCheckpoint(ctx context.Context, id string, ref jobs.CheckpointRef) error
}

// Config tunes one worker.
type Config struct {
	Job    string
	Worker string // unique id of this worker
	Prefix string // Redis key prefix, default "edl:"
	// Advertise is the ring address peers dial (host:port), when it differs
	// from the listener's (a listener on 0.0.0.0); "" means the listener's.
	Advertise string

	Lease     time.Duration // heartbeat and leader lease (default 2s)
	Heartbeat time.Duration // renewal interval (default Lease/5)
	// RingTimeout bounds a stalled ring operation (default 5s); a dead peer
	// is usually seen at once through its closed connection.
	RingTimeout time.Duration
	// JoinTimeout bounds a newcomer's wait for the existing members to reach
	// the step boundary where it is admitted (default 60s).
	JoinTimeout time.Duration
	// ReportWindow is how long the leader waits for the survivors of a broken
	// ring to report before it forms the next generation (default Lease/4).
	ReportWindow time.Duration
	// ProgressEvery throttles progress writes to the job (default 250ms).
	ProgressEvery time.Duration
	// MinStart is how many ready workers generation 1 waits for (default
	// the spec's minimum workers).
	MinStart int
	// LastCall is how long ready newcomers wait for workers of the job
	// still preparing before a first generation or a join admits them
	// (coord.Snapshot.LastCall); 0: no wait, negative: none either (an
	// explicit off where a mode has a default).
	LastCall time.Duration
	// MaxWorkers caps a generation's size (0: the API's limit of 1024; the planner decides the count).
	MaxWorkers int
	// DebugSamples records, per applied step, which samples it consumed.
	DebugSamples bool
	// Threads is how many goroutines compute one gradient (default 1).
	Threads int
	// RestoreFile, when set, is a state file (see SaveFile) a fresh
	// generation starts from instead of the model's seed.
	RestoreFile string
	// SaveFile, when set, is where rank 0 writes the training state when the
	// job stops or ends.
	SaveFile string
	// DirectHandOver gives joiners the root's state over a ring of the
	// root and the joiners only, while the other members keep theirs (see
	// handover.go); on by default. Off: every admission broadcasts the
	// root's state round the whole new ring (slower; kept for comparison).
	DirectHandOver bool
	// StepDelay slows every step down (tests use it to widen windows).
	StepDelay time.Duration
	// Compression puts the gradient on the wire as fp16 when
	// collective.CompressionFP16 (every member of a job must agree). The
	// per-step metadata travels as float32 whatever this says.
	Compression collective.Compression
}

// DefaultConfig fills in the defaults for job and worker.
func DefaultConfig(job, worker string) Config {
	return Config{
		Job: job, Worker: worker, Prefix: "edl:",
		Lease: 2 * time.Second, Heartbeat: 400 * time.Millisecond,
		RingTimeout: 5 * time.Second, JoinTimeout: 60 * time.Second,
		ReportWindow: 500 * time.Millisecond, ProgressEvery: 250 * time.Millisecond,
		Threads: 1, DirectHandOver: true,
	}
}

// Validate names the field at fault.
func (c Config) Validate() error {
	switch {
	case c.Job == "":
		return errors.New("worker config: job: empty")
	case c.Worker == "":
		return errors.New("worker config: worker: empty")
	case c.Lease <= 0 || c.Heartbeat <= 0 || 2*c.Heartbeat > c.Lease:
		return fmt.Errorf("worker config: heartbeat %s must be positive and at most half the lease %s", c.Heartbeat, c.Lease)
	case c.RingTimeout <= 0:
		return errors.New("worker config: ring timeout: must be positive")
	case c.JoinTimeout <= 0:
		return errors.New("worker config: join timeout: must be positive")
	case c.ReportWindow <= 0:
		return errors.New("worker config: report window: must be positive")
	case c.Threads < 0:
		return errors.New("worker config: threads: must be >= 0")
	case c.Compression > collective.CompressionFP16:
		return fmt.Errorf("worker config: compression: unknown %s (want none or fp16)", c.Compression)
	}
	return nil
}
