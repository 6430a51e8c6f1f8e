package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/edl-nomad/edl/checkpoint/cpbench"
	"github.com/edl-nomad/edl/internal/cli"
)

func benchCheckpoint(ctx context.Context, _ Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench checkpoint", "Writes and restores a --mib MiB checkpoint through file:// (in --dir) and s3:// (a SeaweedFS\nweed mini it starts), compares with a plain write of the same bytes, and times the step-loop stall\nof taking a background checkpoint. Throughputs are MiB/s, best of --reps.", stderr)
	mib := fs.Int("mib", 256, "checkpoint size in MiB")
	dir := fs.String("dir", "", "scratch directory on the disk to measure (default: a temporary one)")
	reps := fs.Int("reps", 3, "repetitions of each throughput measurement")
	weedBin := fs.String("weed", "", "SeaweedFS weed binary (default: .tools/bin/weed, then PATH)")
	asJSON := fs.Bool("json", false, "print one JSON line")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *mib < 1 || *reps < 1 {
		return cli.Usagef("bench checkpoint: --mib and --reps must be >= 1")
	}
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(exe), "..", ".tools", "bin"))
	}
	dirs = append(dirs, filepath.Join(".tools", "bin"))
	bin, err := lookWeed(*weedBin, dirs...)
	if err != nil {
		fmt.Fprintf(stderr, "edl bench checkpoint: s3 figures skipped: %v\n", err)
		bin = ""
	}
	res, err := cpbench.Run(ctx, cpbench.Config{MiB: *mib, Dir: *dir, Reps: *reps, WeedBin: bin,
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return fmt.Errorf("bench checkpoint: %w", err)
	}
	if res.S3Skipped != "" && bin != "" {
		fmt.Fprintf(stderr, "edl bench checkpoint: s3 figures skipped: %s\n", res.S3Skipped)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "checkpoint of %d MiB (MiB/s, best of %d)\n", res.MiB, *reps)
	fmt.Fprintf(stdout, "  file: write %.0f  read %.0f  | raw write %.0f  raw read %.0f  (write %.0f%% of raw)\n",
		res.FileWriteMBps, res.FileReadMBps, res.FileRawMBps, res.FileRawReadMBps, 100*res.FileWriteMBps/res.FileRawMBps)
	if res.S3WriteMBps != nil {
		fmt.Fprintf(stdout, "  s3:   write %.0f  read %.0f  | raw write %.0f  raw read %.0f  (write %.0f%% of raw)\n",
			*res.S3WriteMBps, *res.S3ReadMBps, *res.S3RawMBps, *res.S3RawReadMBps, 100**res.S3WriteMBps / *res.S3RawMBps)
	}
	fmt.Fprintf(stdout, "  stall: %.1f ms (plain copy of the parameters %.1f ms; median step %.2f ms, longest during upload %.2f ms)\n",
		res.TrainStallMs, res.CopyMs, res.StepMs, res.UploadStepMaxMs)
	return nil
}
