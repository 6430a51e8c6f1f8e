package core

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/trainer"
)

// CheckSamples counts, from debug records (step -> "epoch|part:start:end,..."),
// the samples of epochs [0, epochs) that no applied step used and the extra
// uses of samples used more than once.
func CheckSamples(records map[int64]string, ds jobs.SyntheticDataset, epochs int) (missed, repeated int64, err error) {
	data, err := trainer.NewDataset(ds)
	if err != nil {
		return 0, 0, err
	}
	return checkSampleRecords(records, data.NumPartitions(), data.Partition, epochs)
}

// CheckLiveSamples is CheckSamples for a live-mode job's data set
// (trainer.exec.dataset: samples in partitions).
func CheckLiveSamples(records map[int64]string, samples int64, partitions, epochs int) (missed, repeated int64, err error) {
	return checkSampleRecords(records, partitions, func(p int) (int64, int64) { return ExecPartition(samples, partitions, p) }, epochs)
}

func checkSampleRecords(records map[int64]string, parts int, partition func(int) (int64, int64), epochs int) (missed, repeated int64, err error) {
	type key struct{ epoch, part int }
	used := map[key][]uint16{}
	for step, payload := range records {
		ep, rest, _ := strings.Cut(payload, "|")
		epoch, err := strconv.Atoi(ep)
		if err != nil {
			return 0, 0, fmt.Errorf("step %d: bad record %q", step, payload)
		}
		for _, seg := range strings.Split(rest, ",") {
			if seg == "" {
				continue
			}
			var p int
			var s, e int64
			if _, err := fmt.Sscanf(seg, "%d:%d:%d", &p, &s, &e); err != nil || p < 0 || p >= parts {
				return 0, 0, fmt.Errorf("step %d: bad record %q", step, seg)
			}
			_, n := partition(p)
			if s < 0 || e > n || s > e {
				return 0, 0, fmt.Errorf("step %d: range %d..%d outside partition %d of %d", step, s, e, p, n)
			}
			k := key{epoch, p}
			if used[k] == nil {
				used[k] = make([]uint16, n)
			}
			for i := s; i < e; i++ {
				used[k][i]++
			}
		}
	}
	for epoch := range epochs {
		for p := range parts {
			u := used[key{epoch, p}]
			_, n := partition(p)
			for i := range n {
				switch {
				case u == nil || u[i] == 0:
					missed++
				case u[i] > 1:
					repeated += int64(u[i] - 1)
				}
			}
		}
	}
	return missed, repeated, nil
}
