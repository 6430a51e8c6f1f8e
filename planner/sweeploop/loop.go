package sweeploop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/internal/nonneg"
	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/jobs/sweepstore"
)

// Leader says whether this process plans now: the planner loop's Fence,
// non-zero while it holds the lease.
type Leader interface{ Fence() int64 }

// Config tunes the controller.
type Config struct {
	// Interval is the time between rounds (default 250ms).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate names the field at fault.
func (c Config) Validate() error {
	return nonneg.First("sweeploop", nonneg.Of("Interval", c.Interval))
}

// Controller runs sweeps.
type Controller struct {
	cfg     Config
	sweeps  *sweepstore.Store
	jobs    *jobstore.Store
	metrics *jobmetrics.Log
	leader  Leader
	log     *slog.Logger
	// cache holds each trial job's metric points read so far; it is only a
	// cache: empty after a takeover, filled again from the streams.
	cache map[string]*trialPoints
}

type trialPoints struct {
	last   string
	metric string
	points []sweep.Point
}

// New wires a controller; leader nil means it always plans (tests, tools).
func New(cfg Config, sweeps *sweepstore.Store, js *jobstore.Store, metrics *jobmetrics.Log, leader Leader, log *slog.Logger) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{cfg: cfg, sweeps: sweeps, jobs: js, metrics: metrics, leader: leader,
		log: log.With("component", "sweeps"), cache: map[string]*trialPoints{}}, nil
}

// Run plays rounds until ctx ends; a round's error is logged and the next
// round tries again from what the store says.
func (c *Controller) Run(ctx context.Context) error {
	active := false
	_ = periodic.Every(ctx, c.cfg.Interval, func() bool {
		if c.leader != nil && c.leader.Fence() == 0 {
			if active {
				c.cache = map[string]*trialPoints{} // a successor may write meanwhile
			}
			active = false
			return true
		}
		active = true
		if err := c.Round(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("sweep round", "err", err)
		}
		return true
	})
	return nil
}

// Round decides and applies once for every live sweep.
func (c *Controller) Round(ctx context.Context) error {
	sws, err := c.sweeps.Active(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, sw := range sws {
		if err := c.step(ctx, sw); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", sw.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) step(ctx context.Context, sw sweep.Sweep) error {
	obs, err := c.observe(ctx, sw)
	if err != nil {
		return err
	}
	plan := sweep.Decide(sw, obs, c.cfg.Now().UTC())
	if !plan.Changed(sw) && lastMetricsSame(sw, plan.Sweep) {
		return nil
	}
	return c.apply(ctx, sw, plan)
}

// observe reads each started trial's job and its new metric points.
func (c *Controller) observe(ctx context.Context, sw sweep.Sweep) (map[int]sweep.Observation, error) {
	obs := map[int]sweep.Observation{}
	for _, t := range sw.Trials {
		if t.JobID == "" {
			continue
		}
		j, err := c.jobs.Get(ctx, t.JobID)
		if errors.Is(err, jobs.ErrNotFound) {
			obs[t.Index] = sweep.Observation{}
			continue
		}
		if err != nil {
			return nil, err
		}
		o := sweep.Observation{JobState: j.State, JobReason: j.Reason, Current: j.Workers.Current, Min: j.Spec.Workers.Min, Max: j.Spec.Workers.Max}
		if j.State.Terminal() {
			o.EndedAt = j.UpdatedAt
		}
		if j.Planner != nil {
			o.Throughput = j.Planner.Throughput
		}
		if t.State == sweep.TrialRunning {
			if o.Points, err = c.points(ctx, t.JobID, sw.Spec.Metric.Name); err != nil {
				return nil, err
			}
		} else {
			delete(c.cache, t.JobID)
		}
		obs[t.Index] = o
	}
	return obs, nil
}

// points returns job's values of metric in step order, reading what is
// new since the last round.
func (c *Controller) points(ctx context.Context, job, metric string) ([]sweep.Point, error) {
	tp := c.cache[job]
	if tp == nil || tp.metric != metric {
		tp = &trialPoints{metric: metric}
		c.cache[job] = tp
	}
	for {
		pts, err := c.metrics.Read(ctx, job, tp.last, 5000)
		if err != nil {
			return nil, err
		}
		for _, p := range pts {
			tp.last = p.ID
			if v, ok := p.Values[metric]; ok {
				tp.points = append(tp.points, sweep.Point{Step: p.Step, Value: v, Epoch: p.Epoch})
			}
		}
		if len(pts) < 5000 {
			break
		}
	}
	sort.SliceStable(tp.points, func(a, b int) bool { return tp.points[a].Step < tp.points[b].Step })
	return tp.points, nil
}

// apply makes the plan so, then records the sweep as planned; a sweep
// written by someone else meanwhile (a DELETE) is left for the next round,
// which decides again from it (every action here is idempotent).
func (c *Controller) apply(ctx context.Context, read sweep.Sweep, plan sweep.Plan) error {
	next := plan.Sweep
	for _, i := range plan.Start {
		t := &next.Trials[i]
		spec, err := sweep.TrialSpec(next.Spec, next.ID, i, t.Params)
		if err != nil {
			t.State, t.EndedAt = sweep.TrialFailed, c.cfg.Now().UTC()
			plan.Events = append(plan.Events, sweep.Event{Type: sweep.EventEnded, Trial: &t.Index, Message: fmt.Sprintf("trial %d failed to start: %v", i, err)})
			delete(plan.Pin, i)
			continue
		}
		j, _, err := c.jobs.Create(ctx, next.Tenant, spec, "sweep:"+next.ID+":"+strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("start trial %d: %w", i, err)
		}
		t.JobID = j.ID
		c.log.Info("trial started", "sweep", next.ID, "trial", i, "job", j.ID, "parameters", t.Params)
	}
	for i, n := range plan.Pin {
		t := next.Trials[i]
		if t.JobID == "" {
			continue
		}
		if err := c.pin(ctx, next.ID, t, n); err != nil {
			return err
		}
	}
	for job, reason := range plan.Cancel {
		if err := c.cancel(ctx, job, reason); err != nil {
			return err
		}
	}
	_, err := c.sweeps.Update(ctx, next.ID, func(s *sweep.Sweep) ([]sweep.Event, error) {
		if s.Version != read.Version {
			return nil, errStale
		}
		s.State, s.Reason, s.Trials, s.Best = next.State, next.Reason, next.Trials, next.Best
		return plan.Events, nil
	})
	if errors.Is(err, errStale) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ev := range plan.Events {
		c.log.Info(ev.Message, "sweep", next.ID, "event", ev.Type)
	}
	return nil
}

var errStale = errors.New("sweep changed since read")

// pin sets the trial job's pinned size (clamped to its spec's bounds).
func (c *Controller) pin(ctx context.Context, sweepID string, t sweep.Trial, n int) error {
	_, _, err := c.jobs.UpdateWith(ctx, t.JobID, func(j *jobs.Job) ([]jobs.Event, error) {
		n := min(max(n, j.Spec.Workers.Min), j.Spec.Workers.Max)
		if j.State.Terminal() || j.State == jobs.Cancelling || j.Workers.Pinned == n {
			return nil, errNothing
		}
		from := j.Workers.Pinned
		if err := j.Pin(n); err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("pinned to %d workers by sweep %s (trial %d)", n, sweepID, t.Index)
		if from > 0 && n > from {
			msg = fmt.Sprintf("pinned to %d workers by sweep %s: trial %d gets workers its cut or finished trials freed", n, sweepID, t.Index)
		}
		return []jobs.Event{{Type: jobs.EventScale, Message: msg, Data: map[string]any{"by": "sweep", "sweep": sweepID, "pinned": n}}}, nil
	})
	if errors.Is(err, errNothing) || errors.Is(err, jobs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pin trial %d: %w", t.Index, err)
	}
	return nil
}

var errNothing = errors.New("nothing to do")

// cancel moves a trial's job to cancelling unless it is already there.
func (c *Controller) cancel(ctx context.Context, job, reason string) error {
	_, err := c.jobs.Update(ctx, job, func(j *jobs.Job) error {
		if j.State.Terminal() || j.State == jobs.Cancelling {
			return errNothing
		}
		j.State, j.Reason = jobs.Cancelling, reason
		return nil
	})
	if errors.Is(err, errNothing) || errors.Is(err, jobs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cancel %s: %w", job, err)
	}
	return nil
}

// lastMetricsSame reports whether no trial's newest metric moved, so that
// a round with nothing to decide writes nothing (the GET still shows the
// newest metric once anything else changes, at least every few rounds).
func lastMetricsSame(a, b sweep.Sweep) bool {
	for i := range a.Trials {
		x, y := a.Trials[i].LastMetric, b.Trials[i].LastMetric
		if (x == nil) != (y == nil) || (x != nil && x.Step+metricEvery <= y.Step) {
			return false
		}
	}
	return true
}

// metricEvery is how many steps a trial's newest metric may move before
// the sweep record is written for it alone.
const metricEvery = 10
