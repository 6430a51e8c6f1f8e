package jobs

import (
	"strconv"
	"time"
)

// ProgressPoint is one sample of a job's progress history: what the workers
// reported at Time, with the job's worker counts then. The dashboard plots
// loss, samples/s and the worker count from these.
type ProgressPoint struct {
	// ID orders points (a Redis stream ID, "ms-seq"); since= takes it.
	ID      string    `json:"id" example:"1700000000000-0"`
	Time    time.Time `json:"time"`
	Epoch   int       `json:"epoch"`
	Step    int64     `json:"step"`
	Samples int64     `json:"samples"`
	// Loss is null when it is not finite, with LossNonFinite naming it.
	Loss float64 `json:"loss"`
	// LossNonFinite is "NaN", "Infinity" or "-Infinity" when Loss is not
	// a finite number (then "loss" is null), else absent.
	LossNonFinite  string  `json:"loss_non_finite,omitempty" enums:"NaN,Infinity,-Infinity"`
	SamplesPerS    float64 `json:"samples_per_s"`
	WorldSize      int     `json:"world_size"`
	Generation     int64   `json:"generation,omitempty"`
	WorkersCurrent int     `json:"workers_current"`
	WorkersTarget  int     `json:"workers_target"`
}

// MaxProgressLimit caps one page of GET .../progress.
const MaxProgressLimit = 5000

// ProgressPointIDAt is the point ID that since= takes for "after t": every
// point recorded after t's millisecond.
func ProgressPointIDAt(t time.Time) string {
	return strconv.FormatInt(max(t.UnixMilli(), 0), 10) + "-18446744073709551615" // IDs start at 1970
}
