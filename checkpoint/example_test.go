package checkpoint_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/edl-nomad/edl/checkpoint"
)

// The worker's leader: open the store once, restore the newest good
// checkpoint at start, then snapshot at step boundaries and let the
// Uploader write in the background.
func Example_leader() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "edl-example-")
	defer os.RemoveAll(dir)

	// cmd/edl passes checkpoint.OptionsFromEnv(os.Getenv) for s3:// URLs.
	store, err := checkpoint.Open(ctx, "file://"+dir, checkpoint.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cat, _ := checkpoint.NewCatalog(store, checkpoint.Config{Job: "job-42", Keep: 3, KeepPerEpoch: true,
		Log: slog.New(slog.DiscardHandler)})
	up := checkpoint.NewUploader(cat, checkpoint.UploaderConfig{OnEvent: func(e checkpoint.Event) {
		// The leader turns these into job events.
		fmt.Println("event:", e.Kind, "step", e.Step)
	}})
	go up.Run(ctx)

	params := make([]float32, 1024)
	up.Reserve(checkpoint.ShardParams, 4*len(params))
	_, err = cat.Restore(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		return nil // a fresh job has nothing to load
	}, func(s checkpoint.Skip) { fmt.Println("skipped", s.Step, s.Reason) })
	fmt.Println("restore of a new job:", err != nil)

	for step := int64(1); step <= 3; step++ {
		params[0] = float32(step) // training
		snap, err := up.Begin(checkpoint.Meta{Step: step, Epoch: 0, Generation: 1, WorldSize: 2})
		if err != nil {
			continue // ErrBusy: the previous upload is still running; reported as skipped
		}
		snap.AddFloat32s(checkpoint.ShardParams, params)
		snap.Add(checkpoint.ShardData, []byte(`{"partition":7,"offset":1200}`))
		up.Submit(snap)
		up.Wait(ctx) // only so the example's output is in order
	}

	got := make([]float32, len(params))
	m, err := cat.Restore(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		rc, err := cp.Open(ctx, checkpoint.ShardParams)
		if err != nil {
			return err
		}
		defer rc.Close()
		return checkpoint.ReadFloat32s(rc, got)
	}, nil)
	fmt.Println("restored step", m.Step, "params[0]", got[0], err)
	// Output:
	// restore of a new job: true
	// event: committed step 1
	// event: committed step 2
	// event: committed step 3
	// restored step 3 params[0] 3 <nil>
}
