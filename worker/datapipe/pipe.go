package datapipe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/internal/rhash"
	"github.com/redis/go-redis/v9"
)

var (
	// ErrStaleGeneration: the caller's generation is no longer current.
	ErrStaleGeneration = errors.New("datapipe: generation is not current")
	// ErrFenced: a newer generation discarded the step being committed.
	ErrFenced = errors.New("datapipe: step discarded by a newer generation")
	// ErrNotOwner: the partition was handed to someone else.
	ErrNotOwner = errors.New("datapipe: partition not owned")
)

// Pipe is one worker's handle on its job's data pipeline.
type Pipe struct {
	rdb    redis.UniversalClient
	keys   coord.Keys
	worker string
}

// New returns the pipeline client of worker; it does no I/O.
func New(rdb redis.UniversalClient, keys coord.Keys, worker string) *Pipe {
	return &Pipe{rdb: rdb, keys: keys, worker: worker}
}

// Order is the order in which epoch's partitions are handed out: a shuffle
// drawn from (seed, epoch), the same on every worker.
func Order(partitions int, seed int64, epoch int) []int {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(epoch)+0x9e3779b97f4a7c15))
	return r.Perm(partitions)
}

// Claim returns the caller's unfinished partition of epoch, or a new one
// from the queue, with its committed offset; part is -1 when the epoch has
// none left. asOf is the caller's last applied step.
func (p *Pipe) Claim(ctx context.Context, gen int64, epoch int, asOf int64, order []int) (part int, offset int64, err error) {
	args := make([]any, 0, 3+len(order))
	args = append(args, p.worker, gen, asOf)
	for _, o := range order {
		args = append(args, o)
	}
	k := p.keys
	res, err := claimScript.Run(ctx, p.rdb, []string{k.GenNum(), k.Todo(epoch), k.Parts(epoch), k.EpochInit(epoch)}, args...).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("claim a partition of epoch %d: %w", epoch, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("claim a partition of epoch %d: reply %v", epoch, res)
	}
	if res[0] == -2 {
		return 0, 0, fmt.Errorf("claim a partition of epoch %d in generation %d: %w", epoch, gen, ErrStaleGeneration)
	}
	return int(res[0]), res[1], nil
}

// Commit is one worker's data cursor after an applied step. Part -1 means
// the worker holds no partition (only debug records are written).
type Commit struct {
	Gen    int64
	Step   int64
	Epoch  int
	Part   int
	Offset int64
	Fin    bool
}

// DebugRecord says which samples an applied step consumed (debug mode).
type DebugRecord struct {
	Step    int64
	Payload string
}

// Commit records c and the debug records in one round trip and returns the
// current generation number.
func (p *Pipe) Commit(ctx context.Context, c Commit, debug []DebugRecord) (gen int64, err error) {
	args := make([]any, 0, 6+2*len(debug))
	args = append(args, p.worker, c.Gen, c.Step, c.Part, c.Offset, boolArg(c.Fin))
	for _, d := range debug {
		args = append(args, d.Step, d.Payload)
	}
	k := p.keys
	n, err := commitScript.Run(ctx, p.rdb, []string{k.Parts(c.Epoch), k.CommitFence(), k.Debug(), k.GenNum()}, args...).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("commit step %d: %w", c.Step, err)
	case n == -1:
		return 0, fmt.Errorf("commit step %d of generation %d: %w", c.Step, c.Gen, ErrFenced)
	case n == -2:
		return 0, fmt.Errorf("commit partition %d at step %d: %w", c.Part, c.Step, ErrNotOwner)
	}
	return n, nil
}

// Release returns the caller's unfinished partitions of the given epochs to
// their queues at their committed offsets.
func (p *Pipe) Release(ctx context.Context, epochs ...int) error {
	keys := make([]string, 0, 2*len(epochs))
	for _, e := range epochs {
		keys = append(keys, p.keys.Parts(e), p.keys.Todo(e))
	}
	if err := releaseScript.Run(ctx, p.rdb, keys, p.worker).Err(); err != nil {
		return fmt.Errorf("release partitions: %w", err)
	}
	return nil
}

// Consumption is what one rank's batch used in a step.
type Consumption struct {
	Worker string
	Part   int
	End    int64
	Fin    bool
}

// Reconciliation is the root's view when a new generation starts.
type Reconciliation struct {
	Gen       int64    // the new generation
	Applied   int64    // the root's last applied step, L
	Epoch     int      // the root's current epoch
	MetaEpoch int      // the epoch of step L's consumption
	Members   []string // the new generation's members
	Meta      []Consumption
	Debug     string // debug record of step L, "" for none
}

// Reconcile makes the partition records agree with the root's state; it
// returns how many partitions went back to a queue. It fails with
// ErrStaleGeneration, writing nothing, when a generation newer than r.Gen
// exists.
func (p *Pipe) Reconcile(ctx context.Context, r Reconciliation) (int, error) {
	k := p.keys
	keys := []string{}
	for _, e := range []int{r.Epoch - 1, r.Epoch, r.Epoch + 1} {
		keys = append(keys, k.Parts(e), k.Todo(e))
	}
	keys = append(keys, k.Parts(r.MetaEpoch), k.CommitFence(), k.Debug(), k.GenNum())
	args := []any{r.Gen, r.Applied, strings.Join(r.Members, ","), r.Debug}
	for _, c := range r.Meta {
		if c.Part >= 0 {
			args = append(args, c.Worker, c.Part, c.End, boolArg(c.Fin))
		}
	}
	n, err := reconcileScript.Run(ctx, p.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return 0, fmt.Errorf("reconcile partitions for generation %d at step %d: %w", r.Gen, r.Applied, err)
	case n == -2:
		return 0, fmt.Errorf("reconcile partitions for generation %d at step %d: %w", r.Gen, r.Applied, ErrStaleGeneration)
	}
	return n, nil
}

// DebugRecords reads every debug record: step -> payload.
func (p *Pipe) DebugRecords(ctx context.Context) (map[int64]string, error) {
	return rhash.Read(ctx, p.rdb, p.keys.Debug(), "debug records", func(s, v string) (int64, string, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, v, err == nil
	})
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}
