package api

import (
	"context"
	"sync"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/prometheus/client_golang/prometheus"
)

// jobMetrics are the series an operator graphs and alerts on, read from the
// store and the cluster at scrape time (so every API replica reports the
// same, whoever runs the planner and wherever the workers are), plus
// counters that a tail of the live jobs' event logs keeps:
//
//	edl_jobs{state,tenant}                      live (non-terminal) jobs
//	edl_job_workers{job,tenant,kind}            kind = current | target
//	edl_job_samples_per_second{job,tenant}      the workers' last report
//	edl_job_loss{job,tenant}
//	edl_job_step{job,tenant}
//	edl_job_checkpoint_age_seconds{job,tenant}  since the last commit
//	edl_gpus{state}                             free | held (by edl's workers) | foreign (by other Nomad jobs)
//	edl_gpus_held{tenant}                       by the tenants' live workers
//	edl_cpu_slots{state}                        free | held
//	edl_resizes_total{kind}                     grow | shrink | failure | straggler
//	edl_resize_stall_seconds                    from workers' events with stall_ms
//	edl_checkpoints_total{result}               committed | failed | skipped
//	edl_worker_gpu_utilization_ratio{job,tenant,worker,gpu}  from NVML, as
//	edl_worker_gpu_memory_used_bytes{...}        workers report it (absent
//	edl_worker_gpu_power_watts{...}              without NVML)
//	edl_planner_rounds_total                    Config.PlannerRounds
//	edl_deadline_jobs{result}                   met | missed: deadline jobs that
//	                                            ended so (their events, since this
//	                                            server started); at_risk: live ones now
//	edl_planner_decide_seconds                  Server.ObserveDecide
type jobMetrics struct {
	s *Server

	jobs, workers, rate, loss, step, ckAge *prometheus.Desc
	gpus, gpusHeld, cpuSlots, rounds       *prometheus.Desc
	gpuUtil, gpuMem, gpuPower, dlJobs      *prometheus.Desc

	resizes     *prometheus.CounterVec
	stall       prometheus.Histogram
	checkpoints *prometheus.CounterVec
	decide      prometheus.Histogram
	// met and missed count the deadline jobs' end events (the tail).
	met, missed int

	// mu serialises scrapes; tails is the event cursor of each job seen
	// live, dropped after its final read once it is no longer live.
	mu    sync.Mutex
	tails map[string]string
	// done are jobs whose final events were counted, so that a late
	// notification about one does not count its log again (bounded: reset
	// when full, by which time those jobs are long over).
	done map[string]bool
}

func newJobMetrics(s *Server) *jobMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	m := &jobMetrics{s: s, tails: map[string]string{}, done: map[string]bool{},
		jobs:     d("edl_jobs", "Live (non-terminal) jobs by state and tenant.", "state", "tenant"),
		workers:  d("edl_job_workers", "Workers of a live job: kind=current (placed) or target (the planner's).", "job", "tenant", "kind"),
		rate:     d("edl_job_samples_per_second", "Training throughput the job's workers last reported.", "job", "tenant"),
		loss:     d("edl_job_loss", "Training loss the job's workers last reported.", "job", "tenant"),
		step:     d("edl_job_step", "Steps the job has applied.", "job", "tenant"),
		ckAge:    d("edl_job_checkpoint_age_seconds", "Seconds since the job's last committed checkpoint.", "job", "tenant"),
		gpus:     d("edl_gpus", "GPUs of the attached cluster: state=free, held (by edl's workers) or foreign (by other Nomad jobs).", "state"),
		gpusHeld: d("edl_gpus_held", "GPUs held by a tenant's live workers.", "tenant"),
		cpuSlots: d("edl_cpu_slots", "CPU worker slots of the attached cluster: state=free or held.", "state"),
		rounds:   d("edl_planner_rounds_total", "Planner rounds run by this process."),
		gpuUtil:  d("edl_worker_gpu_utilization_ratio", "GPU busy time of a worker's GPU (NVML, 0..1).", "job", "tenant", "worker", "gpu"),
		gpuMem:   d("edl_worker_gpu_memory_used_bytes", "Memory used on a worker's GPU (NVML).", "job", "tenant", "worker", "gpu"),
		gpuPower: d("edl_worker_gpu_power_watts", "Power drawn by a worker's GPU (NVML).", "job", "tenant", "worker", "gpu"),
		dlJobs:   d("edl_deadline_jobs", "Deadline jobs: result=met or missed, those that ended so since this server started (their deadline_met and deadline_missed events); at_risk, live ones whose plan misses their deadline now.", "result"),
		resizes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edl_resizes_total",
			Help: "Resizes seen in live jobs' event logs: grow, shrink (planner), failure (an error or a lost worker), straggler (a slow worker replaced)."}, []string{"kind"}),
		stall: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "edl_resize_stall_seconds",
			Help:    "Training stall of a resize as the workers timed it (worker events with stall_ms).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 120}}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edl_checkpoints_total",
			Help: "Checkpoints seen in live jobs' event logs by result: committed, failed, skipped."}, []string{"result"}),
		decide: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "edl_planner_decide_seconds",
			Help:    "Time of one planner Decide call.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}}),
	}
	for _, k := range []string{"grow", "shrink", "failure", "straggler"} {
		m.resizes.WithLabelValues(k)
	}
	for _, r := range []string{"committed", "failed", "skipped"} {
		m.checkpoints.WithLabelValues(r)
	}
	return m
}

func (m *jobMetrics) register(reg *prometheus.Registry) {
	reg.MustRegister(m, m.decide)
}

// Describe sends the scrape-time descriptors and those of the counters the
// event tail keeps (collected here, after the tail, so that a scrape shows
// what it read).
func (m *jobMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.jobs, m.workers, m.rate, m.loss, m.step, m.ckAge, m.gpus, m.gpusHeld, m.cpuSlots, m.rounds, m.gpuUtil, m.gpuMem, m.gpuPower, m.dlJobs} {
		ch <- d
	}
	m.resizes.Describe(ch)
	m.stall.Describe(ch)
	m.checkpoints.Describe(ch)
}

// Collect reads the live jobs and the cluster. A store or cluster that does
// not answer leaves its series out of this scrape (the scrape still works).
func (m *jobMetrics) Collect(ch chan<- prometheus.Metric) {
	if f := m.s.cfg.PlannerRounds; f != nil {
		ch <- prometheus.MustNewConstMetric(m.rounds, prometheus.CounterValue, float64(f()))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer func() {
		m.resizes.Collect(ch)
		m.stall.Collect(ch)
		m.checkpoints.Collect(ch)
	}()
	if m.s.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.s.cfg.StoreTimeout)
	defer cancel()
	active, err := m.s.store.ListActive(ctx)
	if err != nil {
		m.s.log.Warn("metrics: list live jobs", "err", err)
		return
	}
	now := m.s.cfg.Now()
	type key struct{ state, tenant string }
	counts := map[key]int{}
	atRisk := 0
	for _, j := range active {
		counts[key{string(j.State), j.Tenant}]++
		if j.AtRisk {
			atRisk++
		}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{j.ID, j.Tenant}, extra...)...)
		}
		gauge(m.workers, float64(j.Workers.Current), "current")
		gauge(m.workers, float64(j.Workers.Target), "target")
		if j.Progress.Step > 0 {
			gauge(m.rate, j.Progress.SamplesPerS)
			gauge(m.loss, j.Progress.Loss)
			gauge(m.step, float64(j.Progress.Step))
		}
		if ck := j.LastCheckpoint; ck != nil && !ck.CreatedAt.IsZero() {
			gauge(m.ckAge, now.Sub(ck.CreatedAt).Seconds())
		}
		if j.Spec.GPUsPerWorker > 0 {
			m.collectGPUs(ctx, ch, j, now)
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(m.jobs, prometheus.GaugeValue, float64(n), k.state, k.tenant)
	}
	for tenant, u := range jobs.UsageOf(active) {
		ch <- prometheus.MustNewConstMetric(m.gpusHeld, prometheus.GaugeValue, float64(u.GPUs), tenant)
	}
	if m.s.cluster != nil {
		if capa, err := m.s.cluster.Capacity(ctx); err == nil {
			var gpus, freeGPUs, foreign, slots, freeSlots int
			for _, n := range capa.Nodes {
				gpus, freeGPUs, slots, freeSlots = gpus+n.GPUs, freeGPUs+n.FreeGPUs, slots+n.CPUSlots, freeSlots+n.FreeCPUSlots
				foreign += min(n.ForeignGPUs, n.GPUs-n.FreeGPUs)
			}
			ch <- prometheus.MustNewConstMetric(m.gpus, prometheus.GaugeValue, float64(freeGPUs), "free")
			ch <- prometheus.MustNewConstMetric(m.gpus, prometheus.GaugeValue, float64(gpus-freeGPUs-foreign), "held")
			ch <- prometheus.MustNewConstMetric(m.gpus, prometheus.GaugeValue, float64(foreign), "foreign")
			ch <- prometheus.MustNewConstMetric(m.cpuSlots, prometheus.GaugeValue, float64(freeSlots), "free")
			ch <- prometheus.MustNewConstMetric(m.cpuSlots, prometheus.GaugeValue, float64(slots-freeSlots), "held")
		}
	}
	m.tailEvents(ctx, active)
	for r, n := range map[string]int{"met": m.met, "missed": m.missed, "at_risk": atRisk} {
		ch <- prometheus.MustNewConstMetric(m.dlJobs, prometheus.GaugeValue, float64(n), r)
	}
}

// gpuReportAge is how old a worker's GPU report may be and still count.
const gpuReportAge = time.Minute

func (m *jobMetrics) collectGPUs(ctx context.Context, ch chan<- prometheus.Metric, j jobs.Job, now time.Time) {
	reports, err := m.s.store.WorkerGPUStats(ctx, j.ID, now, gpuReportAge)
	if err != nil {
		return
	}
	for _, r := range reports {
		for _, g := range r.GPUs {
			labels := []string{j.ID, j.Tenant, r.Worker, g.UUID}
			ch <- prometheus.MustNewConstMetric(m.gpuUtil, prometheus.GaugeValue, g.UtilizationRatio, labels...)
			ch <- prometheus.MustNewConstMetric(m.gpuMem, prometheus.GaugeValue, float64(g.MemoryUsedBytes), labels...)
			ch <- prometheus.MustNewConstMetric(m.gpuPower, prometheus.GaugeValue, g.PowerWatts, labels...)
		}
	}
}

// tailEvents counts resizes and checkpoints in the events each live job
// logged since the previous scrape. A job that is no longer live gets one
// last read (its final events) and is forgotten.
func (m *jobMetrics) tailEvents(ctx context.Context, active []jobs.Job) {
	live := map[string]bool{}
	for _, j := range active {
		live[j.ID] = true
		if _, ok := m.tails[j.ID]; !ok {
			m.tails[j.ID] = ""
		}
	}
	for id, after := range m.tails {
		for {
			evs, err := m.s.store.Events(ctx, id, after, 500)
			if err != nil {
				break
			}
			for _, ev := range evs {
				m.count(ev)
				after = ev.ID
			}
			if len(evs) < 500 {
				break
			}
		}
		if live[id] || m.endPending(ctx, id) {
			m.tails[id] = after
			continue
		}
		delete(m.tails, id)
		if len(m.done) >= maxTails {
			clear(m.done)
		}
		m.done[id] = true
	}
}

// endPending: an ended deadline job the planner has not torn down yet,
// whose deadline_met or deadline_missed event is still to come.
func (m *jobMetrics) endPending(ctx context.Context, id string) bool {
	j, err := m.s.store.Get(ctx, id)
	return err == nil && j.Spec.HasDeadline() && (j.Planner == nil || !j.Planner.TornDown)
}

// count classifies one event by its type and data fields (never its text).
func (m *jobMetrics) count(ev jobs.Event) {
	num := func(k string) (float64, bool) {
		v, ok := ev.Data[k].(float64)
		return v, ok
	}
	_, hasStep := ev.Data["step"]
	switch ev.Type {
	case jobs.EventScale:
		from, ok1 := num("from")
		to, ok2 := num("to")
		switch {
		case !ok1 || !ok2: // a tenant's pin or respec: the planner's resize follows
		case to > from:
			m.resizes.WithLabelValues("grow").Inc()
		case to < from:
			m.resizes.WithLabelValues("shrink").Inc()
		}
	case jobs.EventWorker:
		if _, ok := num("median_ms"); ok {
			m.resizes.WithLabelValues("straggler").Inc()
		}
		failed, _ := ev.Data["failed"].(bool)
		lost, _ := ev.Data["lost"].(bool)
		if failed || lost { // a worker's death, as the leader logs it

			m.resizes.WithLabelValues("failure").Inc()
		}
		if ms, ok := num("stall_ms"); ok && ms >= 0 {
			m.stall.Observe(ms / 1000)
		}
	case jobs.EventDeadlineMet:
		m.met++
	case jobs.EventDeadlineMissed:
		m.missed++
	case jobs.EventCheckpoint:
		switch {
		case ev.Data["skipped"] == true:
			m.checkpoints.WithLabelValues("skipped").Inc()
		case ev.Data["attempt"] != nil: // a retry; the outcome is logged later
		case hasStep:
			m.checkpoints.WithLabelValues("committed").Inc()
		}
	case jobs.EventError:
		_, aboutWorker := ev.Data["worker"]
		switch {
		case hasStep:
			m.checkpoints.WithLabelValues("failed").Inc() // the worker gave a checkpoint up
		case aboutWorker:
			m.resizes.WithLabelValues("failure").Inc() // a worker lost or failed
		}
	}
}

// follow adds each job submitted from now on to the tail, so that a job
// that starts and ends between two scrapes still has its events counted.
func (m *jobMetrics) follow(ctx context.Context) {
	if m.s.store == nil {
		return
	}
	for id := range m.s.store.Subscribe(ctx) {
		m.mu.Lock()
		if _, ok := m.tails[id]; !ok && !m.done[id] && len(m.tails) < maxTails {
			m.tails[id] = ""
		}
		m.mu.Unlock()
	}
}

// maxTails bounds the jobs the tail follows (between two scrapes).
const maxTails = 100000

// ObserveDecide records the time of one planner Decide call; the planner
// loop calls it (cmd/edl wires it) when it runs in this process.
func (s *Server) ObserveDecide(d time.Duration) { s.metrics.jobs.decide.Observe(d.Seconds()) }
