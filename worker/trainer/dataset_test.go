package trainer

import (
	"slices"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

func spec(seed int64, samples, features, classes, partitions int) jobs.SyntheticDataset {
	return jobs.SyntheticDataset{Seed: seed, Samples: samples, Features: features, Classes: classes, Partitions: partitions}
}

func mustDataset(t testing.TB, d jobs.SyntheticDataset) *Dataset {
	t.Helper()
	ds, err := NewDataset(d)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestNewDatasetValidates(t *testing.T) {
	tests := []struct {
		name  string
		spec  jobs.SyntheticDataset
		field string // "" = valid
	}{
		{"valid", spec(1, 100, 4, 3, 10), ""},
		{"one partition per sample", spec(1, 10, 4, 3, 10), ""},
		{"no samples", spec(1, 0, 4, 3, 1), "samples"},
		{"no features", spec(1, 100, 0, 3, 10), "features"},
		{"one class", spec(1, 100, 4, 1, 10), "classes"},
		{"no partitions", spec(1, 100, 4, 3, 0), "partitions"},
		{"more partitions than samples", spec(1, 10, 4, 3, 11), "partitions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDataset(tc.spec)
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("error %v, want one naming %q", err, tc.field)
			}
		})
	}
}

func TestSamplesArePureFunctionsOfSeedAndID(t *testing.T) {
	a := mustDataset(t, spec(42, 1000, 13, 5, 7))
	b := mustDataset(t, spec(42, 1000, 13, 5, 7))
	other := mustDataset(t, spec(43, 1000, 13, 5, 7))
	xa, xb, xo := make([]float32, 13), make([]float32, 13), make([]float32, 13)
	differ := 0
	counts := make([]int, 5)
	// Out of order on purpose: no sample depends on another having been made.
	for _, id := range []int64{999, 0, 500, 1, 998, 17} {
		la, lb := a.Sample(id, xa), b.Sample(id, xb)
		if la != lb || !slices.Equal(xa, xb) {
			t.Fatalf("sample %d differs between two data sets of one seed", id)
		}
		if lo := other.Sample(id, xo); lo != la || !slices.Equal(xo, xa) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("another seed gave the same samples")
	}
	for id := range int64(1000) {
		counts[a.Sample(id, xa)]++
	}
	// The teacher should use every class, none overwhelmingly.
	for c, n := range counts {
		if n < 40 || n > 500 {
			t.Errorf("class %d has %d of 1000 samples: %v", c, n, counts)
		}
	}
	// Pinned values: the data set is a documented format, so a change to
	// the generator must show up here.
	got := a.Sample(7, xa)
	if want := []float32{-0.19898558, -0.5579469, 1.5350455}; got != 4 || !slices.Equal(xa[:3], want) {
		t.Fatalf("sample 7: label %d, x[0..2] %v; want label 4, %v", got, xa[:3], want)
	}
}

func TestPartitionsCoverEverySampleOnce(t *testing.T) {
	tests := []struct{ samples, partitions int }{
		{1, 1}, {10, 10}, {10, 3}, {1000, 7}, {1 << 20, 1000}, {12345, 64},
	}
	for _, tc := range tests {
		d := mustDataset(t, spec(1, tc.samples, 2, 2, tc.partitions))
		var next, total, smallest, largest int64 = 0, 0, 1 << 62, 0
		for p := range d.NumPartitions() {
			first, count := d.Partition(p)
			if first != next || count <= 0 {
				t.Fatalf("%+v: partition %d is [%d, +%d), want to start at %d", tc, p, first, count, next)
			}
			next, total = first+count, total+count
			smallest, largest = min(smallest, count), max(largest, count)
		}
		if total != int64(tc.samples) || next != int64(tc.samples) {
			t.Fatalf("%+v: partitions cover %d samples, want %d", tc, total, tc.samples)
		}
		if largest-smallest > 1 {
			t.Fatalf("%+v: partition sizes range %d..%d", tc, smallest, largest)
		}
	}
}

func TestPartitionSamplesIsAPermutationPerEpoch(t *testing.T) {
	d := mustDataset(t, spec(3, 10007, 2, 2, 9))
	for p := range d.NumPartitions() {
		first, count := d.Partition(p)
		var orders [][]int64
		for epoch := range 3 {
			// Read in uneven chunks, as a worker resuming at offsets would.
			var order []int64
			buf := make([]int64, 0, 100)
			for off, step := int64(0), 1; off < count; off, step = off+int64(step), step%97+13 {
				order = append(order, d.PartitionSamples(epoch, p, off, step, buf)...)
			}
			if int64(len(order)) != count {
				t.Fatalf("partition %d epoch %d: %d ids, want %d", p, epoch, len(order), count)
			}
			sorted := slices.Sorted(slices.Values(order))
			for i, id := range sorted {
				if id != first+int64(i) {
					t.Fatalf("partition %d epoch %d: not a permutation of [%d, %d)", p, epoch, first, first+count)
				}
			}
			again := d.PartitionSamples(epoch, p, 0, int(count), nil)
			if !slices.Equal(again, order) {
				t.Fatalf("partition %d epoch %d: order not reproducible", p, epoch)
			}
			orders = append(orders, order)
		}
		if slices.Equal(orders[0], orders[1]) || slices.Equal(orders[1], orders[2]) {
			t.Fatalf("partition %d: two epochs share one order", p)
		}
	}
	if got := d.PartitionSamples(0, 0, 1<<40, 5, nil); len(got) != 0 {
		t.Fatalf("past the end: %v, want none", got)
	}
}

// TestHeldOutIsNotTrainingData: held-out sample i is not training sample
// i, is the same on every call, and is labelled like the training data
// (every class appears).
func TestHeldOutIsNotTrainingData(t *testing.T) {
	d, err := NewDataset(jobs.SyntheticDataset{Seed: 3, Samples: 100, Features: 8, Classes: 4, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	xs, xh, again := make([]float32, 8), make([]float32, 8), make([]float32, 8)
	classes := map[int32]bool{}
	for i := range int64(400) {
		lh := d.HeldOut(i, xh)
		if i < 100 {
			d.Sample(i, xs)
			if slices.Equal(xs, xh) {
				t.Fatalf("held-out sample %d equals training sample %d", i, i)
			}
		}
		if d.HeldOut(i, again) != lh || !slices.Equal(again, xh) {
			t.Fatalf("held-out sample %d differs between calls", i)
		}
		classes[lh] = true
	}
	if len(classes) != 4 {
		t.Fatalf("held-out labels cover classes %v, want all 4", classes)
	}
}
