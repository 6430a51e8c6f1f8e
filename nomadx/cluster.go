package nomadx

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/edl-nomad/edl/jobs"
	"github.com/hashicorp/nomad/api"
)

// Cluster is edl's view of a Nomad cluster: it implements the planner's
// Cluster interface.
type Cluster struct {
	cfg    Config
	client *api.Client
	log    *slog.Logger
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
	return &Cluster{cfg: cfg, client: client, log: log.With("component", "nomadx")}, nil
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
// sent again to get a replacement.
func (c *Cluster) Scale(ctx context.Context, job jobs.Job, count int, reason string) error {
	if count < 0 {
		return fmt.Errorf("scale %s: negative count %d", job.ID, count)
	}
	id := c.cfg.NomadJobID(job.ID)
	return c.do(ctx, "scale", id, func(ctx context.Context) error {
		nj, _, err := c.client.Jobs().Info(id, c.q(ctx))
		if notFound(err) {
			return c.register(ctx, job, count, 0, reason)
		}
		if err != nil {
			return err
		}
		if nj.Meta[MetaJobID] != job.ID {
			return permanent(fmt.Errorf("nomad job %s (meta %s=%q): %w", id, MetaJobID, nj.Meta[MetaJobID], ErrNotOurs))
		}
		if nj.Stop != nil && *nj.Stop {
			// Stopped but not purged: registering again runs it.
			return c.register(ctx, job, count, deref(nj.JobModifyIndex), reason)
		}
		var cur *int
		for _, tg := range nj.TaskGroups {
			if tg.Name != nil && *tg.Name == GroupName {
				cur = tg.Count
			}
		}
		if cur == nil {
			return permanent(fmt.Errorf("nomad job %s has no group %q: %w", id, GroupName, ErrNotOurs))
		}
		msg := reason
		if *cur == count {
			failed, err := c.failedHoles(ctx, id, deref(nj.Version))
			if err != nil || failed == 0 {
				return err
			}
			msg = fmt.Sprintf("%s (replace %d failed worker(s))", reason, failed)
		}
		meta := map[string]any{MetaJobID: job.ID, "reason": reason, "previous_count": *cur}
		if _, _, err := c.client.Jobs().Scale(id, GroupName, &count, msg, false, meta, c.w(ctx)); err != nil {
			return err
		}
		c.log.Info("nomad scale", "job", job.ID, "nomad_job", id, "from", *cur, "to", count, "reason", reason)
		return nil
	})
}

// register creates the Nomad job, refusing (through Nomad's enforce-index
// check) to overwrite one that appeared since it was read: never two
// registrations racing into two versions, and the next try adopts it.
func (c *Cluster) register(ctx context.Context, job jobs.Job, count int, modifyIndex uint64, reason string) error {
	tmpl := JobTemplate(c.cfg, job, count)
	resp, _, err := c.client.Jobs().EnforceRegister(tmpl, modifyIndex, c.w(ctx))
	if err != nil {
		return err
	}
	c.log.Info("nomad register", "job", job.ID, "nomad_job", *tmpl.ID, "count", count, "eval", resp.EvalID, "reason", reason)
	return nil
}

// failedHoles counts allocations of the current version that failed and
// were not replaced by Nomad.
func (c *Cluster) failedHoles(ctx context.Context, id string, version uint64) (int, error) {
	allocs, _, err := c.client.Jobs().Allocations(id, false, c.q(ctx))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range allocs {
		if a.TaskGroup == GroupName && a.DesiredStatus == "run" && (a.ClientStatus == "failed" || a.ClientStatus == "lost") &&
			a.JobVersion == version && a.NextAllocation == "" {
			n++
		}
	}
	return n, nil
}

// StopWorker stops one allocation of the job. With the count unchanged
// Nomad places a replacement under the same name index (straggler
// replacement). To remove a worker for good, mark it leaving and lower the
// count instead. Stopping an allocation that is already stopping is a no-op;
// an unknown allocation is an *Error with NotFound().
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
		if a.DesiredStatus != "run" || terminal(a.ClientStatus) {
			return nil
		}
		resp, err := c.client.Allocations().Stop(a, c.q(ctx))
		if err != nil {
			return err
		}
		c.log.Info("nomad stop worker", "job", jobID, "alloc", workerID, "name", a.Name, "eval", resp.EvalID, "reason", reason)
		return nil
	})
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
