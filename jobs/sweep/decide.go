package sweep

import (
	"fmt"
	"sort"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// Observation is what the controller read about one trial's job.
type Observation struct {
	// JobState is its job's state ("" when the job is not found).
	JobState jobs.State
	// JobReason is its job's reason (why it failed, for a failed one).
	JobReason string
	// Current is how many workers the job holds; Min and Max are its
	// spec's bounds.
	Current, Min, Max int
	// Points are the job's values of the sweep's metric, in step order.
	Points []Point
	// EndedAt is when the job reached its terminal state (its last write).
	EndedAt time.Time
	// Throughput is the job's measured samples/s by worker count (the
	// planner's, jobs.PlannerState); growth stops where it stops paying.
	Throughput map[int]float64
}

// MetricsGrace is how long after its job succeeded a trial waits for the
// job's last metric points (they are sent off the step loop and may land
// after the job's end) before it ends without them.
const MetricsGrace = time.Second

// Plan is Decide's answer: the sweep as it should be recorded, and what
// to do to the trials' jobs.
type Plan struct {
	Sweep Sweep
	// Start lists trials to start (create their jobs), in order.
	Start []int
	// Cancel maps a job to cancel to the reason.
	Cancel map[string]string
	// Pin maps a trial to the size to pin its job to.
	Pin    map[int]int
	Events []Event
}

// Changed reports whether the plan does anything.
func (p Plan) Changed(old Sweep) bool {
	return len(p.Start) > 0 || len(p.Cancel) > 0 || len(p.Pin) > 0 || len(p.Events) > 0 || p.Sweep.State != old.State
}

// Decide is the controller's policy, pure: from the sweep as recorded and
// what its trials' jobs say (obs by trial index, for trials with a job),
// it records new rung results, cuts or promotes by ASHA, ends trials whose
// jobs ended, starts trials up to max_concurrent, picks the best trial and
// sizes the running trials (Allot). Deciding again on what Decide
// returned, with the same observations, changes nothing.
func Decide(sw Sweep, obs map[int]Observation, now time.Time) Plan {
	s := cloneSweep(sw)
	p := Plan{Cancel: map[string]string{}, Pin: map[int]int{}}
	ev := func(t EventType, trial int, msg string, data map[string]any) {
		var tp *int
		if trial >= 0 {
			i := trial
			tp = &i
		}
		p.Events = append(p.Events, Event{Time: now, Type: t, Trial: tp, Message: msg, Data: data})
	}
	sc, metric := s.Spec.Scheduler, s.Spec.Metric
	ms := sc.Milestones()

	// Newest metric; rung results in (rung, index) order so that every
	// result is judged against those recorded before it.
	type report struct {
		trial, rung int
		value       float64
		step        int64 // where it was taken, when at is set
		at          bool  // else at the rung's milestone
	}
	var reports []report
	for i := range s.Trials {
		t := &s.Trials[i]
		o, ok := obs[t.Index]
		if !ok || t.State != TrialRunning {
			continue
		}
		if n := len(o.Points); n > 0 {
			last := o.Points[n-1]
			t.LastMetric = &last
		}
		pos := sc.Positions(o.Points)
		// The first non-finite value (a diverged loss) is the trial's
		// result at once, at the rung it was heading for: nothing after it
		// can make it better (Judge cuts it).
		nf := -1
		for k, p := range pos {
			if !jobs.Finite(p.Value) {
				nf = k
				break
			}
		}
		top := false
		for r := t.Rung + 1; r < len(ms); r++ {
			if nf >= 0 && pos[nf].Step <= ms[r] {
				reports = append(reports, report{trial: i, rung: r, value: pos[nf].Value, step: pos[nf].Step, at: true})
				top = true
				break
			}
			v, ok := RungValue(pos, ms[r], sc.Window())
			if !ok {
				break
			}
			reports = append(reports, report{trial: i, rung: r, value: v})
			top = r == len(ms)-1
		}
		// A job that succeeded before the last milestone (its spec is
		// shorter than scheduler.max) has its final value as its result
		// at the last rung, once its last points had time to land.
		if n := len(pos); !top && n > 0 && o.JobState == jobs.Succeeded && now.Sub(o.EndedAt) >= MetricsGrace {
			end := pos[n-1].Step
			v, _ := RungValue(pos, end, sc.Window())
			reports = append(reports, report{trial: i, rung: len(ms) - 1, value: v, step: end, at: true})
		}
	}
	sort.SliceStable(reports, func(a, b int) bool {
		if reports[a].rung != reports[b].rung {
			return reports[a].rung < reports[b].rung
		}
		return reports[a].trial < reports[b].trial
	})
	recorded := map[int][]float64{}
	for _, t := range s.Trials {
		for _, r := range t.Results {
			recorded[r.Rung] = append(recorded[r.Rung], r.Value)
		}
	}
	for _, rp := range reports {
		t := &s.Trials[rp.trial]
		if t.State != TrialRunning || (rp.rung != t.Rung+1 && !rp.at) {
			continue // cut or completed at an earlier rung this round
		}
		step := ms[rp.rung]
		if rp.at {
			step = rp.step
		}
		verdict := Judge(sc, metric, rp.rung, recorded[rp.rung], rp.value)
		recorded[rp.rung] = append(recorded[rp.rung], rp.value)
		t.Rung = rp.rung
		t.Results = append(t.Results, RungResult{Rung: rp.rung, Step: step, Value: rp.value})
		data := valueData(map[string]any{"rung": rp.rung, "step": step, "job": t.JobID}, "value", rp.value)
		val := jobs.FormatValue(rp.value)
		switch {
		case verdict == Cut && !jobs.Finite(rp.value):
			t.State, t.EndedAt = TrialCut, now
			data["diverged"] = true
			ev(EventCut, t.Index, fmt.Sprintf("trial %d cut at rung %d: %s %s at %s %d (diverged)", t.Index, rp.rung, metric.Name, val, sc.unit(), step), data)
		case verdict == Promote:
			ev(EventPromoted, t.Index, fmt.Sprintf("trial %d promoted past rung %d (%s %d, %s %s)", t.Index, rp.rung, sc.unit(), step, metric.Name, val), data)
		case verdict == Cut:
			t.State, t.EndedAt = TrialCut, now
			ev(EventCut, t.Index, fmt.Sprintf("trial %d cut at rung %d (%s %d, %s %s)", t.Index, rp.rung, sc.unit(), step, metric.Name, val), data)
		case verdict == Complete:
			t.State, t.EndedAt = TrialCompleted, now
			ev(EventEnded, t.Index, fmt.Sprintf("trial %d completed at %s %d (%s %s)", t.Index, sc.unit(), step, metric.Name, val), data)
		}
	}

	// Trials whose jobs ended on their own, and jobs of ended trials that
	// still run.
	for i := range s.Trials {
		t := &s.Trials[i]
		o, ok := obs[t.Index]
		if !ok {
			continue
		}
		if t.State == TrialRunning && o.JobState == jobs.Succeeded && now.Sub(o.EndedAt) < MetricsGrace {
			continue // its last points may still come
		}
		if t.State == TrialRunning && (o.JobState.Terminal() || o.JobState == "") {
			switch o.JobState {
			case jobs.Succeeded:
				t.State = TrialCompleted
			case jobs.Failed:
				t.State = TrialFailed
			default:
				t.State = TrialCancelled
			}
			t.EndedAt = now
			msg := fmt.Sprintf("trial %d %s: its job is %s", t.Index, t.State, stateOr(o.JobState))
			data := map[string]any{"job": t.JobID, "job_state": string(o.JobState)}
			if o.JobState == jobs.Failed && o.JobReason != "" {
				msg += ": " + o.JobReason
				data["job_reason"] = o.JobReason
			}
			ev(EventEnded, t.Index, msg, data)
		}
		if live(o.JobState) && o.JobState != jobs.Cancelling && (t.State.Ended() || s.State == Cancelling) {
			p.Cancel[t.JobID] = cancelReason(s, *t)
		}
	}

	// Starts, up to max_concurrent, unless cancelling.
	active := 0
	for _, t := range s.Trials {
		if o := obs[t.Index]; t.State == TrialRunning && !(o.JobState == jobs.Succeeded && t.JobID != "") {
			active++ // a trial whose job is done waits only for its last points
		}
	}
	for i := range s.Trials {
		t := &s.Trials[i]
		if t.State != TrialPending {
			continue
		}
		if s.State == Cancelling {
			t.State, t.EndedAt = TrialCancelled, now
			continue
		}
		if active >= s.Spec.MaxConcurrent {
			break
		}
		active++
		t.State, t.StartedAt = TrialRunning, now
		p.Start = append(p.Start, t.Index)
		ev(EventStarted, t.Index, fmt.Sprintf("trial %d started", t.Index), map[string]any{"parameters": t.Params})
	}

	// The best trial. One that diverged since it was named is not the best
	// any more; with no trial left with a finite result there is none.
	b := best(s)
	switch {
	case b != nil && (s.Best == nil || s.Best.Trial != b.Trial || s.Best.Rung != b.Rung || s.Best.Metric != b.Metric):
		if s.Best == nil || s.Best.Trial != b.Trial {
			ev(EventBestChanged, b.Trial, fmt.Sprintf("best trial: %d (rung %d, %s %s)", b.Trial, b.Rung, metric.Name, jobs.FormatValue(b.Metric)),
				map[string]any{"parameters": b.Params, "rung": b.Rung, "value": b.Metric})
		}
		s.Best = b
	case b == nil && s.Best != nil:
		ev(EventBestChanged, -1, fmt.Sprintf("no best trial: trial %d diverged and no other has a finite result", s.Best.Trial),
			map[string]any{"previous": s.Best.Trial})
		s.Best = nil
	}

	// Sizes: the running trials, best first, share the sweep's budget.
	if s.State == Running {
		var why map[int]string
		var caps map[int]int
		p.Pin, why, caps = sizes(s, obs, p.Start)
		for i, c := range caps {
			s.Trials[i].Cap = c
		}
		idx := make([]int, 0, len(p.Pin))
		for i := range p.Pin {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, i := range idx {
			n, t := p.Pin[i], &s.Trials[i]
			switch {
			case t.Workers != 0 && n > t.Workers:
				ev(EventGrown, i, fmt.Sprintf("trial %d grows from %d to %d workers", i, t.Workers, n), map[string]any{"from": t.Workers, "to": n, "job": t.JobID})
			case n < t.Workers:
				ev(EventShrunk, i, fmt.Sprintf("trial %d back to %d workers: %s", i, n, why[i]), map[string]any{"from": t.Workers, "to": n, "job": t.JobID})
			}
			t.Workers = n
		}
	}

	// The end.
	ended := true
	for i := range s.Trials {
		t := s.Trials[i]
		if !t.State.Ended() {
			ended = false
		}
		if o, ok := obs[t.Index]; ok && live(o.JobState) {
			ended = false // a cancelled trial's job still winds down
		}
	}
	if ended && !s.State.Terminal() {
		to := Succeeded
		if s.State == Cancelling {
			to = Cancelled
		}
		ev(EventState, -1, fmt.Sprintf("%s -> %s", s.State, to), map[string]any{"from": string(s.State), "to": string(to)})
		s.State = to
		s.Reason = ""
	}
	p.Sweep = s
	return p
}

// sizes pins the running trials whose size changes (started ones always),
// with the reason for each that shrinks.
func sizes(s Sweep, obs map[int]Observation, started []int) (pins map[int]int, why map[int]string, caps map[int]int) {
	tmin := max(s.Spec.Template.Workers.Min, 1)
	budget := s.Spec.Budget()
	held := 0
	var slots []Slot
	why, caps = map[int]string{}, map[int]int{}
	isNew := map[int]bool{}
	for _, i := range started {
		isNew[i] = true
	}
	for _, i := range rank(s) {
		t := s.Trials[i]
		o := obs[i]
		if t.State.Ended() {
			if live(o.JobState) {
				held += o.Current
			}
			continue
		}
		if t.State != TrialRunning {
			continue
		}
		lo, hi := o.Min, o.Max
		if isNew[i] || lo == 0 {
			lo, hi = tmin, max(s.Spec.Template.Workers.Max, tmin)
		}
		if u := UsefulMax(o.Throughput, hi); u < hi {
			hi = max(u, lo)
		}
		if t.Cap > 0 {
			hi = max(min(hi, t.Cap), lo)
		}
		pinned := t.Workers
		switch {
		case o.JobState == jobs.Suspended && pinned > lo:
			// The planner could not place the gang it was pinned to (another
			// job took the freed slots first): back to its minimum.
			pinned, why[i] = lo, fmt.Sprintf("its job could not be placed at %d", t.Workers)
		case pinned > hi:
			pinned, why[i] = hi, fmt.Sprintf("it was no faster at %d than at %d", t.Workers, hi)
			caps[i] = hi
		}
		if live(o.JobState) && o.Current > max(pinned, lo) {
			held += o.Current - max(pinned, lo) // a shrinking trial's workers leave first
		}
		// Only a trial placed at its size and measured there grows, so that
		// UsefulMax has seen each size before the next.
		_, measured := o.Throughput[t.Workers]
		slots = append(slots, Slot{Index: i, Min: lo, Max: hi, Pinned: pinned,
			Placed: !isNew[i] && o.JobState == jobs.Running && o.Current >= t.Workers && measured})
	}
	want := Allot(budget, held, slots)
	out := map[int]int{}
	for i, n := range want {
		if isNew[i] || n != s.Trials[i].Workers {
			out[i] = n
		}
	}
	return out, why, caps
}

// UsefulMax is the largest size worth giving a trial by its measured
// throughput (samples/s by worker count, the planner's measurements): the
// last size before the first one that was not at least 5 % faster than
// the next smaller measured size; max when every step up paid.
func UsefulMax(throughput map[int]float64, max int) int {
	ns := make([]int, 0, len(throughput))
	for n := range throughput {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for k := 1; k < len(ns); k++ {
		if throughput[ns[k]] <= 1.05*throughput[ns[k-1]] {
			return min(ns[k-1], max)
		}
	}
	return max
}

// rank orders the trials best first: the highest rung, then the best
// value there, then the lowest index; trials with no result after, and
// after them the trials whose newest result is not finite (diverged),
// whatever their rung.
func rank(s Sweep) []int {
	idx := make([]int, len(s.Trials))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) (int, float64) {
		t := s.Trials[i]
		if len(t.Results) == 0 {
			return -1, 0
		}
		r := t.Results[len(t.Results)-1]
		if !jobs.Finite(r.Value) {
			return -2, 0
		}
		return r.Rung, r.Value
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ra, va := key(idx[a])
		rb, vb := key(idx[b])
		if ra != rb {
			return ra > rb
		}
		if ra >= 0 && va != vb {
			return s.Spec.Metric.Better(va, vb)
		}
		return idx[a] < idx[b]
	})
	return idx
}

// best is the first trial by rank with a finite result; nil when none has
// one. A diverged trial is never the best.
func best(s Sweep) *Best {
	r := rank(s)
	if len(r) == 0 || len(s.Trials[r[0]].Results) == 0 || !jobs.Finite(s.Trials[r[0]].Results[len(s.Trials[r[0]].Results)-1].Value) {
		return nil
	}
	t := s.Trials[r[0]]
	res := t.Results[len(t.Results)-1]
	return &Best{Trial: t.Index, JobID: t.JobID, Params: t.Params, Rung: res.Rung, Metric: res.Value}
}

func live(st jobs.State) bool { return st != "" && !st.Terminal() }

func stateOr(st jobs.State) string {
	if st == "" {
		return "gone"
	}
	return string(st)
}

func cancelReason(s Sweep, t Trial) string {
	switch {
	case s.State == Cancelling:
		return fmt.Sprintf("sweep %s cancelled", s.ID)
	case t.State == TrialCut:
		return fmt.Sprintf("cut by sweep %s at rung %d", s.ID, t.Rung)
	case t.State == TrialCompleted:
		return fmt.Sprintf("completed sweep %s's last rung", s.ID)
	}
	return fmt.Sprintf("trial of sweep %s ended", s.ID)
}

func cloneSweep(s Sweep) Sweep {
	c := s
	c.Trials = make([]Trial, len(s.Trials))
	for i, t := range s.Trials {
		t.Results = append([]RungResult(nil), t.Results...)
		if t.LastMetric != nil {
			lm := *t.LastMetric
			t.LastMetric = &lm
		}
		c.Trials[i] = t
	}
	if s.Best != nil {
		b := *s.Best
		c.Best = &b
	}
	return c
}
