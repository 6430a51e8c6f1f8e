package cpbench

import (
	"context"
	"testing"
)

// The figures themselves are not asserted (no wall-clock in tests); this
// checks that every one is measured and the S3 part reports why it is off.
func TestRunMeasuresEveryFileFigure(t *testing.T) {
	res, err := Run(context.Background(), Config{MiB: 4, Reps: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	figures := map[string]float64{
		"file_write": res.FileWriteMBps, "file_read": res.FileReadMBps,
		"file_raw": res.FileRawMBps, "file_raw_read": res.FileRawReadMBps,
		"train_stall": res.TrainStallMs, "copy": res.CopyMs, "step": res.StepMs,
	}
	for name, v := range figures {
		if !(v > 0) {
			t.Errorf("%s = %v, want a positive measurement", name, v)
		}
	}
	if res.S3WriteMBps != nil || res.S3Skipped == "" {
		t.Errorf("without weed: s3_write %v, skipped %q; want null and a reason", res.S3WriteMBps, res.S3Skipped)
	}
	if res.MiB != 4 {
		t.Errorf("mib = %d, want 4", res.MiB)
	}
}
