package jobmetrics

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// MaxLen caps each job's log (oldest trimmed).
const MaxLen = 100000

// Point is one report: the values of named metrics at a step. A value
// may be NaN or infinite (a diverged loss is a real observation, which
// the sweep controller judges as the worst there is): in JSON such values
// are in "non_finite" (name -> "NaN", "Infinity" or "-Infinity"), the
// finite ones in "values", so that a reader that does not know
// "non_finite" sees the finite ones as before.
type Point struct {
	// ID is the stream entry's, set by Read.
	ID     string             `json:"id,omitempty"`
	Step   int64              `json:"step"`
	Epoch  int                `json:"epoch,omitempty"`
	Values map[string]float64 `json:"values"`
}

// pointJSON is a Point as stored.
type pointJSON struct {
	ID        string             `json:"id,omitempty"`
	Step      int64              `json:"step"`
	Epoch     int                `json:"epoch,omitempty"`
	Values    map[string]float64 `json:"values"`
	NonFinite map[string]string  `json:"non_finite,omitempty"`
}

// MarshalJSON puts the non-finite values in "non_finite".
func (p Point) MarshalJSON() ([]byte, error) {
	w := pointJSON{ID: p.ID, Step: p.Step, Epoch: p.Epoch, Values: make(map[string]float64, len(p.Values))}
	for k, v := range p.Values {
		if n := jobs.NonFiniteName(v); n != "" {
			if w.NonFinite == nil {
				w.NonFinite = map[string]string{}
			}
			w.NonFinite[k] = n
			continue
		}
		w.Values[k] = v
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Point) UnmarshalJSON(b []byte) error {
	var w pointJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Point{ID: w.ID, Step: w.Step, Epoch: w.Epoch, Values: w.Values}
	for k, n := range w.NonFinite {
		v, err := jobs.ParseNonFinite(n)
		if err != nil {
			return fmt.Errorf("metric %q: %w", k, err)
		}
		if p.Values == nil {
			p.Values = map[string]float64{}
		}
		p.Values[k] = v
	}
	return nil
}

// Key is job's metric stream under prefix (the job store's, "edl:").
func Key(prefix, job string) string { return prefix + "{" + job + "}:metrics" }

// Log reads and writes the metric streams of jobs under one prefix.
type Log struct {
	rdb    redis.UniversalClient
	prefix string
}

// New returns the log over rdb with the job store's key prefix.
func New(rdb redis.UniversalClient, prefix string) *Log {
	if prefix == "" {
		prefix = "edl:"
	}
	return &Log{rdb: rdb, prefix: prefix}
}

// Append adds points to job's log in one round trip. Values that are not
// finite (NaN, ±Inf) are kept, as "non_finite" (Point).
func (l *Log) Append(ctx context.Context, job string, pts ...Point) error {
	if len(pts) == 0 {
		return nil
	}
	pipe := l.rdb.Pipeline()
	for _, p := range pts {
		p.ID = ""
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode metric point: %w", err)
		}
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: Key(l.prefix, job), MaxLen: MaxLen, Approx: true, Values: []any{"m", b}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("append metrics of %s: %w", job, err)
	}
	return nil
}

// Read returns up to limit points of job after afterID ("" = from the
// oldest kept), oldest first; lines that do not decode are skipped.
func (l *Log) Read(ctx context.Context, job, afterID string, limit int) ([]Point, error) {
	start := "-"
	if afterID != "" {
		start = "(" + afterID
	}
	msgs, err := l.rdb.XRangeN(ctx, Key(l.prefix, job), start, "+", int64(max(limit, 1))).Result()
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", job, err)
	}
	out := make([]Point, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["m"].(string)
		var p Point
		if json.Unmarshal([]byte(raw), &p) != nil {
			continue
		}
		p.ID = m.ID
		out = append(out, p)
	}
	return out, nil
}
