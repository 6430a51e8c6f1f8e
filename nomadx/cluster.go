package nomadx

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/hashicorp/nomad/api"
)

// Cluster is edl's view of a Nomad cluster: it implements the planner's
// Cluster interface.
type Cluster struct {
	cfg    Config
	client *api.Client
	log    *slog.Logger
	cache  *cache
}

// New builds a Cluster; it does not contact Nomad.
func New(cfg Config, log *slog.Logger) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ac := &api.Config{
		Address:    cfg.Address,
		Region:     cfg.Region,
		Namespace:  cfg.Namespace,
		SecretID:   cfg.Token,
		HttpClient: cfg.HTTPClient,
	}
	if t := cfg.TLS; t != (TLS{}) {
		ac.TLSConfig = &api.TLSConfig{CACert: t.CACert, ClientCert: t.ClientCert, ClientKey: t.ClientKey,
			TLSServerName: t.ServerName, Insecure: t.Insecure}
	}
	client, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("nomad client: %w", err)
	}
	return &Cluster{cfg: cfg, client: client, log: log.With("component", "nomadx"), cache: newCache()}, nil
}

// permanentError marks an error a retry cannot fix although Nomad did not
// answer 4xx (for example a job that is not ours).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

func (c *Cluster) q(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{}).WithContext(ctx)
}

func (c *Cluster) w(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

func notFound(err error) bool {
	s, _ := statusOf(err)
	return s == http.StatusNotFound
}

// Scale makes the edl job's Nomad job run count workers. The first call
// registers the job (or adopts the one a previous edl serve registered);
// later calls use Jobs().Scale with a message and meta naming the edl job
// and the reason. A call that changes nothing sends nothing: each Nomad
// Scale makes a new job version, which would restart finished workers.
// The exception is a worker that failed for good in the current version:
// Nomad does not replace it until the next version, so the same count is
// sent again to get a replacement. A job stopped outside edl (`nomad job
// stop`) is registered again once, at count; at count 0 it is left
// stopped. Scale(0) of an unknown job sends nothing.
//
// Right after Capacity the job's count is known from that read and the
// last write: a change costs one request, a no-op none.
func (c *Cluster) Scale(ctx context.Context, job jobs.Job, count int, reason string) error {
	if count < 0 {
		return fmt.Errorf("scale %s: negative count %d", job.ID, count)
	}
	id := c.cfg.NomadJobID(job.ID)
	if v := c.fresh(id); v != nil {
		if stub := v.jobs[id]; stub != nil && !stub.Stop {
			if in, ok := c.knownInfo(id, stub); ok && c.scaleKnown(ctx, job, id, in, count, reason, v.allocs) {
				return nil
			}
		}
	}
	return c.do(ctx, "scale", id, func(ctx context.Context) error {
		nj, _, err := c.client.Jobs().Info(id, c.q(ctx))
		if notFound(err) {
			if count == 0 {
				return nil
			}
			return c.register(ctx, job, count, 0, 0, reason)
		}
		if err != nil {
			return err
		}
		in, err := infoFrom(nj, job.ID)
		if err != nil {
			return err
		}
		if in.stopped {
			if count == 0 {
				return nil
			}
			// Stopped but not purged: registering again runs it, once, at
			// the target (not at 0 and then a scale: a needless version).
			return c.register(ctx, job, count, in.jobModify, in.version+1, reason)
		}
		c.cache.mu.Lock()
		c.cache.info[id] = in
		c.cache.mu.Unlock()
		msg := reason
		if in.count == count {
			allocs, _, err := c.client.Jobs().Allocations(id, false, c.q(ctx))
			if err != nil {
				return err
			}
			failed := failedHoles(allocs, in.version)
			if failed == 0 {
				return nil
			}
			msg = fmt.Sprintf("%s (replace %d failed worker(s))", reason, failed)
		}
		return c.scaleTo(ctx, job.ID, id, in, count, reason, msg)
	})
}

// scaleKnown is Scale's first try from the round's view; it reports
// whether it is done. A failed write is left to the re-reading retries.
func (c *Cluster) scaleKnown(ctx context.Context, job jobs.Job, id string, in jobInfo, count int, reason string, view []*api.AllocationListStub) bool {
	msg := reason
	if in.count == count {
		var mine []*api.AllocationListStub
		for _, a := range view {
			if a.JobID == id && a.Namespace == c.ns() {
				mine = append(mine, a)
			}
		}
		failed := failedHoles(mine, in.version)
		if failed == 0 {
			return true
		}
		msg = fmt.Sprintf("%s (replace %d failed worker(s))", reason, failed)
	}
	tctx, cancel := context.WithTimeout(ctx, c.cfg.Retry.Timeout)
	defer cancel()
	if err := c.scaleTo(tctx, job.ID, id, in, count, reason, msg); err != nil {
		c.log.Debug("nomad scale from view failed; re-reading", "nomad_job", id, "err", err)
		return false
	}
	return true
}

// scaleTo sends one Jobs().Scale and records the new version.
func (c *Cluster) scaleTo(ctx context.Context, jobID, id string, in jobInfo, count int, reason, msg string) error {
	meta := map[string]any{MetaJobID: jobID, "reason": reason, "previous_count": in.count}
	resp, _, err := c.client.Jobs().Scale(id, GroupName, &count, msg, false, meta, c.w(ctx))
	if err != nil {
		return err
	}
	c.touched(id, &jobInfo{count: count, version: in.version + 1, jobModify: resp.JobModifyIndex})
	c.log.Info("nomad scale", "job", jobID, "nomad_job", id, "from", in.count, "to", count, "reason", msg)
	return nil
}

// register creates the Nomad job, refusing (through Nomad's enforce-index
// check) to overwrite one that appeared since it was read: never two
// registrations racing into two versions, and the next try adopts it.
// version is the job version the register makes (0 for a new job).
func (c *Cluster) register(ctx context.Context, job jobs.Job, count int, modifyIndex, version uint64, reason string) error {
	tmpl := JobTemplate(c.cfg, job, count)
	resp, _, err := c.client.Jobs().EnforceRegister(tmpl, modifyIndex, c.w(ctx))
	if err != nil {
		return err
	}
	c.touched(*tmpl.ID, &jobInfo{count: count, version: version, jobModify: resp.JobModifyIndex})
	c.log.Info("nomad register", "job", job.ID, "nomad_job", *tmpl.ID, "count", count, "eval", resp.EvalID, "reason", reason)
	return nil
}

// failedHoles counts allocations of the current version that failed and
// were not replaced by Nomad.
func failedHoles(allocs []*api.AllocationListStub, version uint64) int {
	n := 0
	for _, a := range allocs {
		if a.TaskGroup == GroupName && a.DesiredStatus == "run" && (a.ClientStatus == "failed" || a.ClientStatus == "lost") &&
			a.JobVersion == version && a.NextAllocation == "" {
			n++
		}
	}
	return n
}

// StopWorker removes one chosen worker for good, the way Nomad's batch
// reconciler allows (Nomad cannot be told which allocation a scale-in
// stops, hashicorp/nomad#7876; docs/nomad.md has the reasoning):
//
//  1. a running worker is sent SIGTERM (the task's kill signal, through
//     the allocation signal endpoint): it finishes its step, hands back
//     its partition and exits 0. A batch allocation that exits 0 is
//     complete and Nomad does not replace it while the job version stays.
//  2. once it is complete (noticed by the next Capacity read, or by
//     StopWorker when the round's view already shows it finished), the
//     group's count is lowered by one: the new version
//     no longer counts the finished allocation, and the remaining live
//     allocations fill the lower count exactly, so Nomad stops no other
//     worker and places none for the freed name index (which a later
//     scale-up reuses).
//
// The planner should also mark the worker leaving in Redis first (the
// worker then leaves the same way without the signal). A worker already
// stopping is left alone; an unknown allocation is an *Error with
// NotFound().
func (c *Cluster) StopWorker(ctx context.Context, jobID, workerID, reason string) error {
	id := c.cfg.NomadJobID(jobID)
	return c.do(ctx, "stop", id, func(ctx context.Context) error {
		a, _, err := c.client.Allocations().Info(workerID, c.q(ctx))
		if err != nil {
			return err
		}
		if a.JobID != id {
			return permanent(fmt.Errorf("allocation %s belongs to nomad job %s: %w", workerID, a.JobID, ErrNotOurs))
		}
		if a.DesiredStatus != "run" {
			return nil
		}
		if !terminal(a.ClientStatus) {
			c.cache.mu.Lock()
			_, sent := c.cache.leaving[a.ID]
			c.cache.mu.Unlock()
			if sent {
				return nil
			}
			if err := c.client.Allocations().Signal(a, c.q(ctx), TaskName, "SIGTERM"); err != nil {
				return err
			}
			c.cache.mu.Lock()
			c.cache.leaving[a.ID] = jobID
			c.cache.mu.Unlock()
			c.log.Info("nomad remove worker: leave", "job", jobID, "alloc", workerID, "name", a.Name, "reason", reason)
			return nil
		}
		if c.liveInView(a.ID) {
			// The round's view (which the caller's counts come from) still
			// has it running: lower the count at the next Capacity, in step
			// with the next view, not under the caller's feet.
			c.cache.mu.Lock()
			c.cache.leaving[a.ID] = jobID
			c.cache.mu.Unlock()
			return nil
		}
		var version uint64
		if a.Job != nil {
			version = deref(a.Job.Version)
		}
		return c.release(ctx, jobID, id, a.ID, version, a.NextAllocation, nil, reason)
	})
}

// liveInView reports whether the current view lists the allocation as
// desired-run and not finished.
func (c *Cluster) liveInView(allocID string) bool {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	v := c.cache.v
	if v == nil || time.Since(v.at) > c.cfg.ViewMaxAge {
		return false
	}
	for _, a := range v.allocs {
		if a.ID == allocID {
			return a.DesiredStatus == "run" && !terminal(a.ClientStatus)
		}
	}
	return false
}

// release lowers the count by the slot a finished allocation of the
// current version holds; an allocation of an older version (a later
// version already dropped it) or a replaced one holds none.
func (c *Cluster) release(ctx context.Context, jobID, id, allocID string, version uint64, next string, stub *api.JobListStub, reason string) error {
	in, found, err := c.infoOf(ctx, jobID, id, stub)
	if err != nil {
		return err
	}
	done := func() {
		c.cache.mu.Lock()
		delete(c.cache.leaving, allocID)
		c.cache.mu.Unlock()
	}
	if !found || in.stopped || version != in.version || next != "" || in.count == 0 {
		done()
		return nil
	}
	msg := fmt.Sprintf("remove worker %s: %s", allocID, reason)
	if err := c.scaleTo(ctx, jobID, id, in, in.count-1, reason, msg); err != nil {
		return err
	}
	done()
	return nil
}

// finishLeaving lowers the count for signalled workers that exited.
func (c *Cluster) finishLeaving(ctx context.Context, v *view) {
	c.cache.mu.Lock()
	leaving := make(map[string]string, len(c.cache.leaving))
	for k, j := range c.cache.leaving {
		leaving[k] = j
	}
	c.cache.mu.Unlock()
	byID := map[string]*api.AllocationListStub{}
	for _, a := range v.allocs {
		if _, ok := leaving[a.ID]; ok {
			byID[a.ID] = a
		}
	}
	for allocID, jobID := range leaving {
		a := byID[allocID]
		if a != nil && !terminal(a.ClientStatus) && a.DesiredStatus == "run" {
			continue // still leaving
		}
		if a == nil || a.DesiredStatus != "run" {
			c.cache.mu.Lock()
			delete(c.cache.leaving, allocID)
			c.cache.mu.Unlock()
			continue
		}
		id := c.cfg.NomadJobID(jobID)
		stub := v.jobs[id]
		if stub == nil {
			// Not in the view's job list, read with it: the job was purged
			// (its finished allocations stay listed until Nomad's GC).
			// There is no count to lower, and the info cached from edl's
			// last write is no evidence of a job.
			c.cache.mu.Lock()
			delete(c.cache.leaving, allocID)
			delete(c.cache.info, id)
			c.cache.mu.Unlock()
			continue
		}
		err := c.do(ctx, "scale", id, func(ctx context.Context) error {
			return c.release(ctx, jobID, id, allocID, a.JobVersion, a.NextAllocation, stub, "worker left")
		})
		if err != nil {
			c.log.Warn("nomad remove worker: lower count", "job", jobID, "alloc", allocID, "err", err)
		}
	}
}

// Teardown deregisters the job with purge. A job that is already gone is
// not an error; a Nomad job with the ID that edl did not register is left
// alone (ErrNotOurs).
func (c *Cluster) Teardown(ctx context.Context, jobID string) error {
	id := c.cfg.NomadJobID(jobID)
	return c.do(ctx, "deregister", id, func(ctx context.Context) error {
		nj, _, err := c.client.Jobs().Info(id, c.q(ctx))
		if notFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if nj.Meta[MetaJobID] != jobID {
			return permanent(fmt.Errorf("nomad job %s: %w", id, ErrNotOurs))
		}
		eval, _, err := c.client.Jobs().Deregister(id, true, c.w(ctx))
		if err != nil {
			return err
		}
		c.touched(id, nil)
		c.cache.mu.Lock()
		for a, j := range c.cache.leaving {
			if j == jobID {
				delete(c.cache.leaving, a)
			}
		}
		c.cache.mu.Unlock()
		c.log.Info("nomad deregister", "job", jobID, "nomad_job", id, "eval", eval)
		return nil
	})
}

func terminal(clientStatus string) bool {
	return clientStatus == "complete" || clientStatus == "failed" || clientStatus == "lost"
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
