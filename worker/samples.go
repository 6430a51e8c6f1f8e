package worker

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
			if _, err := fmt.Sscanf(seg, "%d:%d:%d", &p, &s, &e); err != nil || p < 0 || p >= data.NumPartitions() {
				return 0, 0, fmt.Errorf("step %d: bad record %q", step, seg)
			}
			_, n := data.Partition(p)
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
		for p := range data.NumPartitions() {
			u := used[key{epoch, p}]
			_, n := data.Partition(p)
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
