package cpbench

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
)

// measureStall runs a simulated training loop, small fixed steps over the
// parameter vector, and takes checkpoints through the Uploader at step
// boundaries, as the worker's leader does. The stall is the time the loop
// stands still at the boundary; steps taken while the upload runs beside
// the loop are timed separately.
func measureStall(ctx context.Context, cfg Config, params []float32, store checkpoint.Store, res *Result) error {
	cat, err := checkpoint.NewCatalog(store, checkpoint.Config{Job: "bench-stall", Keep: 1, Log: cfg.Log})
	if err != nil {
		return err
	}
	u := checkpoint.NewUploader(cat, checkpoint.UploaderConfig{})
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = u.Run(uctx) }()
	size := 4 * len(params)
	u.Reserve(checkpoint.ShardParams, size) // as a worker does at start

	// The reference: a plain copy of the parameters into a warm buffer,
	// taken right before each checkpoint so both see the same conditions.
	plain := make([]byte, size)
	checkpoint.PutFloat32s(plain, params)

	// A step touches 4 MiB of parameters (less for tiny models).
	chunk := max(1, min(1<<20, len(params)/64))
	pos := 0
	step := func() {
		p := params[pos : pos+min(chunk, len(params)-pos)]
		for i := range p {
			p[i] = p[i]*0.999 + 0.001
		}
		pos += len(p)
		if pos >= len(params) {
			pos = 0
		}
	}
	var base []time.Duration
	for range 200 {
		t := time.Now()
		step()
		base = append(base, time.Since(t))
	}
	sort.Slice(base, func(i, j int) bool { return base[i] < base[j] })
	median := base[len(base)/2]
	res.StepMs = ms(median)

	var worstStep, worstSnap, worstCopy time.Duration
	for n := int64(1); n <= 3; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		checkpoint.PutFloat32s(plain, params)
		worstCopy = max(worstCopy, time.Since(t))
		t = time.Now()
		s, err := u.Begin(checkpoint.Meta{Step: n})
		if err != nil {
			return fmt.Errorf("stall: begin checkpoint %d: %w", n, err)
		}
		s.AddFloat32s(checkpoint.ShardParams, params)
		u.Submit(s)
		worstSnap = max(worstSnap, time.Since(t))
		// Train on while it uploads, timing every step.
		for u.Busy() {
			t := time.Now()
			step()
			worstStep = max(worstStep, time.Since(t))
		}
		r, err := u.Wait(ctx)
		if err != nil {
			return err
		}
		if r.Err != nil {
			return fmt.Errorf("stall: checkpoint %d: %w", n, r.Err)
		}
	}
	res.TrainStallMs, res.CopyMs, res.UploadStepMaxMs = ms(worstSnap), ms(worstCopy), ms(worstStep)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
