package loop

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// world is what a round read: the store's live and finished jobs, the
// cluster's capacity and each job's workers, with the loop's memory of
// each job brought up to date. Reading writes nothing anywhere.
type world struct {
	now      time.Time
	capacity jobs.Capacity
	tenants  []planner.TenantShare
	// finished are the terminal jobs still to tear down or call back.
	finished []jobs.Job
	// sending are the finished jobs whose callback is in flight from here.
	sending map[string]bool
	jobs    []observed
	// service is the service of the newest succeeded jobs (GPU seconds).
	service []float64
}

// observed is one live job as read this round.
type observed struct {
	job     *jobs.Job
	tr      *tracked
	workers []jobs.Worker // all, finished ones included
	live    []jobs.Worker // pending or running
	speeds  []planner.WorkerSpeed
	// done: the workers' done marker says the training reached its end
	// (read only once every worker has exited for SettleAfter).
	done bool
	// moved says how a deadline job's speed estimate moved this round
	// ("" when it did not): it is re-planned from its least share.
	moved string
}

// read takes the round's snapshot. An error about one job drops that job
// from the round (it is returned, joined, beside a usable world); an error
// about the whole (the store, the capacity, the lease) returns no world.
func (l *Loop) read(ctx context.Context) (world, []error, error) {
	if err := l.snap.refresh(ctx, l.store); err != nil {
		return world{}, nil, err
	}
	capa, err := l.cluster.Capacity(ctx)
	if err != nil {
		return world{}, nil, fmt.Errorf("planner snapshot: capacity: %w", err)
	}
	l.hook("capacity")
	if err := l.holding(); err != nil {
		return world{}, nil, err
	}
	var errs []error
	w := world{now: l.cfg.Now(), capacity: capa, sending: l.sendingNow()}
	if l.cfg.Tenants != nil {
		w.tenants = l.cfg.Tenants()
	}
	if w.finished, err = l.store.Finished(ctx); err != nil {
		errs = append(errs, err)
	}
	for i, j := range w.finished {
		if tr := l.track[j.ID]; tr != nil {
			w.finished[i] = withAttained(j, tr.attained)
		}
		l.snap.remove(j.ID)
		delete(l.track, j.ID)
	}
	if l.serviceDue {
		if s, err := l.store.ServiceHistory(ctx); err != nil {
			// Not fatal: the round ranks by the history last read.
			errs = append(errs, err)
		} else {
			l.service, l.serviceDue = s, false
		}
	}
	// This round may clean finished jobs up: the next one reads again.
	l.serviceDue = l.serviceDue || len(w.finished) > 0
	w.service = l.service
	dt := 0.0
	if !l.last.IsZero() {
		dt = w.now.Sub(l.last).Seconds()
	}
	l.last = w.now
	for _, j := range l.snap.list() {
		o, err := l.observe(ctx, j, w.now, dt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w.jobs = append(w.jobs, o)
	}
	return w, errs, nil
}

// withAttained is j with the attained service this planner counted, when
// that is more than its record says (the record is saved every SaveEvery,
// and a job its workers ended became terminal in between).
func withAttained(j jobs.Job, attained float64) jobs.Job {
	if j.Planner != nil && j.Planner.AttainedGPUSeconds >= attained {
		return j
	}
	j.Planner = j.Planner.Clone()
	if j.Planner == nil {
		j.Planner = &jobs.PlannerState{}
	}
	j.Planner.AttainedGPUSeconds = attained
	return j
}

// observe reads one job's workers (when it may have some) and updates the
// loop's memory of it: since when every worker has exited, and, for a job
// the policy plans, its attained service and measured throughput.
func (l *Loop) observe(ctx context.Context, j *jobs.Job, now time.Time, dt float64) (observed, error) {
	o := observed{job: j, tr: l.tracked(j)}
	if l.mayHaveWorkers(j, o.tr) {
		ws, err := l.cluster.Workers(ctx, j.ID)
		if err != nil {
			return o, fmt.Errorf("workers of %s: %w", j.ID, err)
		}
		o.workers = ws
	}
	o.live = planner.LiveWorkers(o.workers)
	if j.State == jobs.Cancelling {
		return o, nil
	}
	if !allExited(j, o.workers) {
		o.tr.exitedSince = time.Time{}
	} else if o.tr.exitedSince.IsZero() {
		o.tr.exitedSince = now
	}
	if !o.tr.exitedSince.IsZero() {
		if !now.Before(o.tr.exitedSince.Add(l.cfg.SettleAfter)) && l.cfg.Done != nil {
			st, err := l.cfg.Done.JobDone(ctx, j.ID)
			if err != nil {
				return o, fmt.Errorf("settle %s: %w", j.ID, err)
			}
			o.done = st == jobs.Succeeded
		}
		return o, nil
	}
	units := max(j.Spec.GPUsPerWorker, 1)
	o.tr.attained += dt * float64(len(o.live)*units)
	// A speed reported within estimateSettle of a resize spans the switch
	// and the warm-up (a live run reported 470 samples/s at 3 workers,
	// then 3,900 at 4): not a measurement of the size yet.
	settled := o.tr.lastResize.IsZero() || now.Sub(o.tr.lastResize) >= estimateSettle
	if p := j.Progress; p.WorldSize > 0 && p.SamplesPerS > 0 && p.WorldSize == len(o.live) && settled {
		v := smoothed(j, o.tr.throughput, p)
		o.moved = estimateMoved(j, o.tr, l.cfg.Policy.CommRatio, v)
		o.tr.throughput[p.WorldSize] = v
	}
	if j.State == jobs.Running && l.cfg.Speeds != nil && l.cfg.Policy.Straggler.Factor > 0 {
		o.speeds = l.speeds(ctx, j.ID, o.live)
	}
	return o, nil
}

// estimateSettle is how long after a resize a job's reported speed is not
// taken as a measurement of its new size (the first reports after a resize
// are low: they span the switch and the warm-up).
const estimateSettle = 5 * time.Second

// speedWeight is the weight of a deadline job's newest speed report in its
// throughput at that size (an exponential average: on a loaded machine
// successive reports of one size differ by 4x, and every plan of the job
// would swing with them).
const speedWeight = 0.3

// smoothed is the throughput to record at p's size: the report itself,
// or for a deadline job its exponential average with the one recorded.
func smoothed(j *jobs.Job, thr map[int]float64, p jobs.Progress) float64 {
	old, ok := thr[p.WorldSize]
	if !j.Spec.HasDeadline() || !ok || old <= 0 {
		return p.SamplesPerS
	}
	return old + speedWeight*(p.SamplesPerS-old)
}

// estimateMoved compares a deadline job's measured speed with what the
// planner assumed at that size (what it assumed at its last re-plan, else
// the estimate from its other figures and its prior) and says how it moved when it did
// materially (planner.EstimateMoved); it notes the new figure as assumed.
func estimateMoved(j *jobs.Job, tr *tracked, commRatio, measured float64) string {
	p := j.Progress
	if !j.Spec.HasDeadline() {
		return ""
	}
	was, ok := tr.assumed[p.WorldSize]
	if !ok {
		others := maps.Clone(tr.throughput)
		delete(others, p.WorldSize)
		was = planner.SpeedAt(others, j.Spec.PerWorkerSpeed, commRatio, p.WorldSize)
	}
	if !planner.EstimateMoved(was, measured) {
		return ""
	}
	if tr.assumed == nil {
		tr.assumed = map[int]float64{}
	}
	tr.assumed[p.WorldSize] = measured
	return fmt.Sprintf("speed estimate at %d workers moved from %.4g to %.4g/s", p.WorldSize, was, measured)
}

// allExited: a starting or running job whose every worker has exited (and
// none is still stopping) is a candidate for settling.
func allExited(j *jobs.Job, ws []jobs.Worker) bool {
	if (j.State != jobs.Starting && j.State != jobs.Running) || len(ws) == 0 || len(planner.LiveWorkers(ws)) > 0 {
		return false
	}
	for _, w := range ws {
		if w.State == jobs.WorkerStopping {
			return false
		}
	}
	return true
}

// tracked returns the memory kept about j, seeded from its record when this
// planner first sees it (after a restart or a takeover).
func (l *Loop) tracked(j *jobs.Job) *tracked {
	tr := l.track[j.ID]
	if tr == nil {
		tr = &tracked{throughput: map[int]float64{}}
		if p := j.Planner; p != nil {
			tr.attained, tr.lastResize, tr.lastReplace = p.AttainedGPUSeconds, p.LastResize, p.LastReplace
			maps.Copy(tr.throughput, p.Throughput)
		}
		tr.saved = l.cfg.Now()
		l.track[j.ID] = tr
	}
	return tr
}

// mayHaveWorkers says whether the cluster must be asked for j's workers:
// always the first time this planner sees it (a predecessor may have placed
// some), then only while it has, or is meant to have, workers. Queued jobs
// cost no cluster call.
func (l *Loop) mayHaveWorkers(j *jobs.Job, tr *tracked) bool {
	if j.State == jobs.Starting || j.State == jobs.Running || j.State == jobs.Cancelling ||
		j.Workers.Current > 0 || j.Workers.Target > 0 || !tr.exitedSince.IsZero() {
		return true
	}
	if _, seen := l.listed[j.ID]; !seen {
		l.listed[j.ID] = struct{}{}
		return true
	}
	return false
}

// speeds lists j's running workers with what each last published.
func (l *Loop) speeds(ctx context.Context, jobID string, live []jobs.Worker) []planner.WorkerSpeed {
	var running []string
	for _, w := range live {
		if w.State == jobs.WorkerRunning {
			running = append(running, w.ID)
		}
	}
	if len(running) < 3 {
		return nil
	}
	figs, err := l.cfg.Speeds.StepTimes(ctx, jobID)
	if err != nil {
		// Not fatal for the round; no replacement this time.
		l.log.Warn("read worker step times", "job", jobID, "err", err)
		return nil
	}
	slices.Sort(running)
	out := make([]planner.WorkerSpeed, 0, len(running))
	for _, id := range running {
		f, ok := figs[id]
		if !ok {
			f = planner.WorkerSpeed{}
		}
		f.ID = id
		out = append(out, f)
	}
	return out
}

func (l *Loop) sendingNow() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.sending)
}
