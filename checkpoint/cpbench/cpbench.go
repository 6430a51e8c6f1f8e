package cpbench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/checkpoint/s3ready"
	"github.com/edl-nomad/edl/internal/nonneg"
)

// Config says what to measure.
type Config struct {
	MiB  int    // size of the parameters; default 256
	Dir  string // scratch directory on the disk to measure; default a temp dir
	Reps int    // repetitions of each throughput figure, best kept; default 3
	// WeedBin is the SeaweedFS binary for the S3 figures; empty skips them.
	WeedBin string
	Log     *slog.Logger
}

// Result is the benchmark's JSON line. Throughputs are MiB/s (2^20 bytes
// per second), best of Reps; S3 figures are null when no server ran.
type Result struct {
	MiB int `json:"mib"`

	FileWriteMBps   float64 `json:"file_write_mbps"`    // Catalog.Write: shard + SHA-256 + fsync + manifest
	FileReadMBps    float64 `json:"file_read_mbps"`     // Catalog.Restore: read + verify
	FileRawMBps     float64 `json:"file_raw_mbps"`      // os write + fsync of the same bytes
	FileRawReadMBps float64 `json:"file_raw_read_mbps"` // plain read of that file

	S3WriteMBps   *float64 `json:"s3_write_mbps"`
	S3ReadMBps    *float64 `json:"s3_read_mbps"`
	S3RawMBps     *float64 `json:"s3_raw_mbps"`      // one minio-go PutObject, default options
	S3RawReadMBps *float64 `json:"s3_raw_read_mbps"` // one minio-go GetObject
	S3Skipped     string   `json:"s3_skipped,omitempty"`

	// TrainStallMs is the longest time the step loop stood still to take
	// a checkpoint: Uploader.Begin, copying the parameters, Submit.
	TrainStallMs float64 `json:"train_stall_ms"`
	CopyMs       float64 `json:"copy_ms"` // longest plain copy of the parameters into a warm buffer
	StepMs       float64 `json:"step_ms"` // median step of the simulated loop
	// UploadStepMaxMs is the longest single step while an upload ran
	// beside the loop (CPU and memory-bandwidth contention, not a stall).
	UploadStepMaxMs float64 `json:"upload_step_max_ms"`
}

// Run measures; the S3 part runs only when cfg.WeedBin is set.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg.MiB = cmp.Or(cfg.MiB, 256)
	cfg.Reps = cmp.Or(cfg.Reps, 3)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "edl-bench-checkpoint-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	res := Result{MiB: cfg.MiB}
	params := make([]float32, cfg.MiB<<20/4)
	data := make([]byte, len(params)*4)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(data) // incompressible
	for i := range params {
		params[i] = float32(i%1000) / 1000
	}

	fileStore, err := checkpoint.NewFileStore(filepath.Join(cfg.Dir, "store"))
	if err != nil {
		return res, err
	}
	if err := measureFile(ctx, cfg, data, fileStore, &res); err != nil {
		return res, err
	}
	if cfg.WeedBin == "" {
		res.S3Skipped = "no weed binary"
	} else if err := measureS3(ctx, cfg, data, &res); err != nil {
		res.S3Skipped = err.Error()
	}
	if err := measureStall(ctx, cfg, params, fileStore, &res); err != nil {
		return res, err
	}
	return res, nil
}

func mibps(n int, d time.Duration) float64 {
	return float64(n) / (1 << 20) / d.Seconds()
}

// op is one timed operation; setup runs untimed before each run.
type op struct {
	setup, run func() error
	best       time.Duration
}

// interleave runs each op reps times, rotating their order every round so
// a figure and its plain counterpart see the same disk, cache and load,
// and keeps each op's fastest run.
func interleave(reps int, ops ...*op) error {
	for i := 0; i < reps; i++ {
		for j := range ops {
			o := ops[(i+j)%len(ops)]
			if o.setup != nil {
				if err := o.setup(); err != nil {
					return err
				}
			}
			start := time.Now()
			if err := o.run(); err != nil {
				return err
			}
			if d := time.Since(start); o.best == 0 || d < o.best {
				o.best = d
			}
		}
	}
	return nil
}

// checkpointOps are a checkpoint write of data and its verified restore.
func checkpointOps(ctx context.Context, cfg Config, store checkpoint.Store, job string, data []byte) (write, read *op, err error) {
	cat, err := checkpoint.NewCatalog(store, checkpoint.Config{Job: job, Keep: 1, Log: cfg.Log})
	if err != nil {
		return nil, nil, err
	}
	step := int64(0)
	write = &op{
		setup: func() error { _, err := cat.Prune(ctx); return err }, // keep the disk from filling up
		run: func() error {
			step++
			_, err := cat.Write(ctx, checkpoint.Meta{Step: step}, []checkpoint.ShardSource{
				{Name: checkpoint.ShardParams, Size: int64(len(data)), Body: bytes.NewReader(data)},
			})
			return err
		},
	}
	into := make([]byte, len(data))
	read = &op{run: func() error {
		_, err := cat.Restore(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) error {
			rc, err := cp.Open(ctx, checkpoint.ShardParams)
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.ReadFull(rc, into); err != nil {
				return err
			}
			if _, err := rc.Read(make([]byte, 1)); err != io.EOF { // the SHA-256 check
				return fmt.Errorf("params shard: %v", err)
			}
			return nil
		}, nil)
		return err
	}}
	return write, read, nil
}

func measureFile(ctx context.Context, cfg Config, data []byte, store checkpoint.Store, res *Result) error {
	raw := filepath.Join(cfg.Dir, "raw.bin")
	defer os.Remove(raw)
	rawWrite := &op{run: func() error {
		f, err := os.Create(raw)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write(data); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return f.Close()
	}}
	into := make([]byte, len(data))
	rawRead := &op{run: func() error {
		f, err := os.Open(raw)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.ReadFull(f, into)
		return err
	}}
	sp, err := compare(ctx, cfg, store, "bench-file", data, rawWrite, rawRead, "file")
	if err != nil {
		return err
	}
	res.FileRawMBps, res.FileWriteMBps = sp.rawWrite, sp.write
	res.FileRawReadMBps, res.FileReadMBps = sp.rawRead, sp.read
	return nil
}

// speeds are a store's best throughputs, MiB/s, against the raw ones.
type speeds struct {
	rawWrite, write, rawRead, read float64
}

// compare times the checkpoint writes and reads of store (checkpointOps,
// as job) each interleaved with the raw ones of the same bytes, cfg.Reps
// times; what ("file", "s3") names the errors.
func compare(ctx context.Context, cfg Config, store checkpoint.Store, job string, data []byte, rawWrite, rawRead *op, what string) (speeds, error) {
	write, read, err := checkpointOps(ctx, cfg, store, job, data)
	if err != nil {
		return speeds{}, err
	}
	if err := interleave(cfg.Reps, rawWrite, write); err != nil {
		return speeds{}, fmt.Errorf("%s write: %w", what, err)
	}
	if err := interleave(cfg.Reps, rawRead, read); err != nil {
		return speeds{}, fmt.Errorf("%s read: %w", what, err)
	}
	n := len(data)
	return speeds{rawWrite: mibps(n, rawWrite.best), write: mibps(n, write.best),
		rawRead: mibps(n, rawRead.best), read: mibps(n, read.best)}, nil
}

func measureS3(ctx context.Context, cfg Config, data []byte, res *Result) error {
	secret := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
	endpoint, stop, err := startS3(ctx, cfg.WeedBin, filepath.Join(cfg.Dir, "weed"), "edlbench", secret)
	if err != nil {
		return err
	}
	defer stop()
	client, err := s3ready.Client(endpoint, "edlbench", secret)
	if err != nil {
		return err
	}
	const bucket = "edl-bench"
	if err := client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		return err
	}
	rawWrite := &op{run: func() error {
		_, err := client.PutObject(ctx, bucket, "raw", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	}}
	into := make([]byte, len(data))
	rawRead := &op{run: func() error {
		obj, err := client.GetObject(ctx, bucket, "raw", minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer obj.Close()
		_, err = io.ReadFull(obj, into)
		return err
	}}
	store, err := checkpoint.Open(ctx, "s3://"+bucket+"/ckpt", checkpoint.Options{
		Endpoint: "http://" + endpoint, AccessKey: "edlbench", SecretKey: secret})
	if err != nil {
		return err
	}
	sp, err := compare(ctx, cfg, store, "bench-s3", data, rawWrite, rawRead, "s3")
	if err != nil {
		return err
	}
	res.S3RawMBps, res.S3WriteMBps, res.S3RawReadMBps, res.S3ReadMBps = &sp.rawWrite, &sp.write, &sp.rawRead, &sp.read
	return nil
}

// Validate names the field at fault; zero values take the defaults.
func (c Config) Validate() error {
	return nonneg.First("cpbench", nonneg.Of("MiB", c.MiB), nonneg.Of("Reps", c.Reps))
}
