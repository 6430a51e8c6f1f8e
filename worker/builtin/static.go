package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/trainer"
)

// StaticConfig runs the same trainer over a fixed world without Redis: the
// baseline that coordination overhead is measured against.
type StaticConfig struct {
	World, Rank int
	Dir         string // rendezvous: each rank writes its address to Dir/rank-<r>
	Spec        jobs.Spec
	Threads     int
	Timeout     time.Duration
	StepLog     io.Writer // same format as Deps.StepLog
}

// RunStatic trains with ranks fixed for the whole run: rank r takes
// partitions r, r+World, ... in order, shares of them as the elastic loop
// takes them (core.ShareSize: a partition's tail merges into its last
// batch), every step all-reduces the same gradient-plus-metadata buffer as
// the elastic loop, and nothing touches Redis.
func RunStatic(ctx context.Context, cfg StaticConfig, tr *collective.Transport) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	bt, err := validateSpec(cfg.Spec)
	if err != nil {
		return err
	}
	mc := trainer.ModelConfigFrom(*bt)
	mc.Threads = max(cfg.Threads, 1)
	model, err := trainer.NewModel(mc)
	if err != nil {
		return err
	}
	data, err := trainer.NewDataset(bt.Dataset)
	if err != nil {
		return err
	}
	opt := trainer.NewSGD(model.NumParams(), float32(bt.LearningRate), float32(bt.Momentum))
	peers, err := rendezvous(ctx, cfg.Dir, cfg.World, cfg.Rank, tr.Addr())
	if err != nil {
		return err
	}
	ring, err := tr.NewRing(ctx, collective.RingConfig{Generation: 1, Rank: cfg.Rank, Peers: peers, Timeout: cfg.Timeout})
	if err != nil {
		return err
	}
	defer ring.Close()
	plan := planBatch(bt, cfg.Spec.Workers.Min, cfg.World, cfg.Rank)
	np, feat := model.NumParams(), data.Features()
	buf := make([]float32, np+1+core.BlockLen(cfg.World)) // gradient, loss, step block
	grad, meta := buf[:np], buf[np:]
	x, labels := make([]float32, (plan.local+1)*feat), make([]int32, plan.local+1) // a tail merged: local+1
	var ids []int64
	var step int64
	for epoch := 0; epoch < bt.Epochs; epoch++ {
		part, off := cfg.Rank, int64(0)
		for {
			clear(buf)
			n := 0
			var loss float64
			for part < data.NumPartitions() {
				if _, size := data.Partition(part); off < size {
					break
				}
				part, off = part+cfg.World, 0
			}
			if part < data.NumPartitions() {
				_, size := data.Partition(part)
				ids = data.PartitionSamples(epoch, part, off, core.ShareSize(size-off, plan.local), ids)
				n = len(ids)
				data.Batch(ids, x[:n*feat], labels[:n])
				loss = model.Gradient(x[:n*feat], labels[:n], n, grad)
				off += int64(n)
			}
			meta[0], meta[1+core.BlockCount] = float32(loss), float32(n)
			if err := ring.AllReduceExactTail(ctx, buf, len(meta)); err != nil {
				return fmt.Errorf("static step %d: %w", step, err)
			}
			total := int(math.Round(float64(meta[1+core.BlockCount])))
			if total == 0 {
				break
			}
			k := 1 / float32(total)
			for i := range grad {
				grad[i] *= k
			}
			opt.LR = plan.lr
			opt.Step(model.Params(), grad)
			if cfg.StepLog != nil {
				fmt.Fprintf(cfg.StepLog, "%d %d %d %d %d %.6f\n", time.Now().UnixNano(), step, 1, cfg.World, epoch, float64(meta[0])/float64(total))
			}
			step++
		}
	}
	return nil
}

// rendezvous publishes this rank's address in dir and waits for every rank's.
func rendezvous(ctx context.Context, dir string, world, rank int, addr string) ([]string, error) {
	tmp := filepath.Join(dir, ".rank-"+strconv.Itoa(rank))
	if err := os.WriteFile(tmp, []byte(addr), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "rank-"+strconv.Itoa(rank))); err != nil {
		return nil, err
	}
	peers := make([]string, world)
	for r := range world {
		for {
			b, err := os.ReadFile(filepath.Join(dir, "rank-"+strconv.Itoa(r)))
			if err == nil {
				peers[r] = string(b)
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return peers, nil
}

// Validate names the field at fault (the spec is checked by RunStatic).
func (c StaticConfig) Validate() error {
	switch {
	case c.World < 1:
		return fmt.Errorf("static: World %d: must be at least 1", c.World)
	case c.Rank < 0 || c.Rank >= c.World:
		return fmt.Errorf("static: Rank %d: must be in [0, %d)", c.Rank, c.World)
	case c.Dir == "":
		return errors.New("static: Dir: the rendezvous folder is required")
	}
	return nil
}
