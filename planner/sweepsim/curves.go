package sweepsim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
)

// Curves are the trials' learning curves: the metric a trial reports
// after step steps (step >= 1).
type Curves interface {
	Value(trial int, step int64) float64
	// Check reports why the curves cannot serve trials trials (nil: they can).
	Check(trials int) error
}

// Seeded are synthetic learning curves drawn per trial from (Seed, trial):
// floor + amp x (1 + step/tau)^-0.8 plus noise of Noise x amp x the same
// decay, with floor in [0.1, 0.6), amp in [1.5, 2.5) and tau log-uniform
// in [10, 1000) steps. Trials that start slow may end best (their curves
// cross), as real ones do, so ASHA can cut a trial that would have won:
// Result.OracleBest says which trial the full curves favour.
type Seeded struct {
	Seed  uint64
	Noise float64 // relative noise; 0.05 by default (NewSeeded)
}

// NewSeeded returns seeded curves with the default noise.
func NewSeeded(seed uint64) Seeded { return Seeded{Seed: seed, Noise: 0.05} }

func (s Seeded) params(trial int) (floor, amp, tau float64) {
	u := func(k uint64) float64 {
		return float64(mix64(mix64(s.Seed^0x5eed)+uint64(trial)*golden+k)>>11) / (1 << 53)
	}
	return 0.1 + 0.5*u(1), 1.5 + u(2), math.Pow(10, 1+2*u(3))
}

func (s Seeded) Value(trial int, step int64) float64 {
	floor, amp, tau := s.params(trial)
	decay := math.Pow(1+float64(step)/tau, -0.8)
	n := float64(mix64(mix64(s.Seed)^uint64(trial)*golden^uint64(step)*0x94d049bb133111eb)>>11)/(1<<53)*2 - 1
	return floor + amp*decay*(1+s.Noise*n)
}

func (Seeded) Check(int) error { return nil }

const golden = 0x9e3779b97f4a7c15

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Recorded are curves read from a metric log: JSON lines
// {"trial": I, "step": S, "value": V}. Trial I's value after step s is
// its last recorded value at or before s (its first before that).
type Recorded struct {
	points map[int][]logPoint
}

type logPoint struct {
	Trial *int     `json:"trial"`
	Step  *int64   `json:"step"`
	Value *float64 `json:"value"`
}

// ReadRecorded reads a metric log; a line that is not such an object is
// an error naming its line.
func ReadRecorded(r io.Reader) (*Recorded, error) {
	rec := &Recorded{points: map[int][]logPoint{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var p logPoint
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("metric log line %d: %w", line, err)
		}
		switch {
		case p.Trial == nil || *p.Trial < 0:
			return nil, fmt.Errorf("metric log line %d: want a \"trial\" >= 0", line)
		case p.Step == nil || *p.Step < 0:
			return nil, fmt.Errorf("metric log line %d: want a \"step\" >= 0", line)
		case p.Value == nil || math.IsNaN(*p.Value) || math.IsInf(*p.Value, 0):
			return nil, fmt.Errorf("metric log line %d: want a finite \"value\"", line)
		}
		rec.points[*p.Trial] = append(rec.points[*p.Trial], p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metric log: %w", err)
	}
	if len(rec.points) == 0 {
		return nil, fmt.Errorf("metric log: no points")
	}
	for _, ps := range rec.points {
		sort.SliceStable(ps, func(a, b int) bool { return *ps[a].Step < *ps[b].Step })
	}
	return rec, nil
}

func (r *Recorded) Value(trial int, step int64) float64 {
	ps := r.points[trial]
	i := sort.Search(len(ps), func(i int) bool { return *ps[i].Step > step })
	if i == 0 {
		return *ps[0].Value
	}
	return *ps[i-1].Value
}

func (r *Recorded) Check(trials int) error {
	for i := range trials {
		if len(r.points[i]) == 0 {
			return fmt.Errorf("metric log: no points of trial %d (the sweep has %d trials)", i, trials)
		}
	}
	return nil
}
