package nomadx

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// view is one read of the cluster, the round's snapshot: every node with
// its resources, every allocation (all namespaces) with its resources, and
// edl's Nomad jobs (prefix JobPrefix, in Namespace) with their summaries.
// Three requests whatever the number of jobs; per-job answers (Workers,
// Scale's no-op check) come from it.
type view struct {
	at     time.Time
	nodes  []*api.NodeListStub
	allocs []*api.AllocationListStub
	jobs   map[string]*api.JobListStub // by Nomad job ID
	// served are the edl jobs whose Workers this view answered: it answers
	// each job once (one planner round); a second call reads again.
	served map[string]bool
}

// jobInfo is what nomadx knows of one Nomad job's group from its last
// read or write: valid while the job's JobModifyIndex is unchanged.
type jobInfo struct {
	count     int
	version   uint64
	jobModify uint64
	stopped   bool
}

// cache holds the view, the per-job infos and the workers being removed.
type cache struct {
	mu   sync.Mutex
	v    *view
	info map[string]jobInfo // by Nomad job ID
	// dirty are Nomad jobs written since the view was read: their
	// allocations in it are stale.
	dirty map[string]bool
	// leaving are allocations StopWorker signalled: once they exited, the
	// job's count is lowered by one (allocation ID -> edl job ID).
	leaving map[string]string
}

func newCache() *cache {
	return &cache{info: map[string]jobInfo{}, dirty: map[string]bool{}, leaving: map[string]string{}}
}

// refresh reads a new view (three requests).
func (c *Cluster) refresh(ctx context.Context) (*view, error) {
	var v *view
	err := c.do(ctx, "read", "", func(ctx context.Context) error {
		q := c.q(ctx)
		q.Params = map[string]string{"resources": "true"}
		nodes, _, err := c.client.Nodes().List(q)
		if err != nil {
			return err
		}
		aq := c.q(ctx)
		aq.Namespace = "*"
		aq.Params = map[string]string{"resources": "true", "task_states": "false"}
		allocs, _, err := c.client.Allocations().List(aq)
		if err != nil {
			return err
		}
		jq := c.q(ctx)
		jq.Prefix = c.cfg.JobPrefix
		list, _, err := c.client.Jobs().List(jq)
		if err != nil {
			return err
		}
		v = &view{at: time.Now(), nodes: nodes, allocs: allocs, jobs: map[string]*api.JobListStub{}, served: map[string]bool{}}
		for _, j := range list {
			if strings.HasPrefix(j.ID, c.cfg.JobPrefix) && (j.Namespace == "" || j.Namespace == c.ns()) {
				v.jobs[j.ID] = j
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.cache.mu.Lock()
	c.cache.v = v
	c.cache.dirty = map[string]bool{}
	c.cache.mu.Unlock()
	return v, nil
}

func (c *Cluster) ns() string {
	if c.cfg.Namespace == "" {
		return "default"
	}
	return c.cfg.Namespace
}

// fresh returns the view when it is recent enough and the job was not
// written since; nil otherwise.
func (c *Cluster) fresh(nomadJob string) *view {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	v := c.cache.v
	if v == nil || time.Since(v.at) > c.cfg.ViewMaxAge || c.cache.dirty[nomadJob] {
		return nil
	}
	return v
}

// touched records a write to a Nomad job: its part of the view is stale;
// info, when not nil, is what the write set.
func (c *Cluster) touched(nomadJob string, info *jobInfo) {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	c.cache.dirty[nomadJob] = true
	if info != nil {
		c.cache.info[nomadJob] = *info
	} else {
		delete(c.cache.info, nomadJob)
	}
}

// knownInfo is the cached info of a job if it is still valid against the
// list stub (nil: no stub to check, trust the last write).
func (c *Cluster) knownInfo(nomadJob string, stub *api.JobListStub) (jobInfo, bool) {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	in, ok := c.cache.info[nomadJob]
	if !ok || (stub != nil && stub.JobModifyIndex != in.jobModify) {
		return jobInfo{}, false
	}
	return in, true
}

// infoOf reads the job (one request) unless the cached info is valid.
// found is false for an unknown job. The job must be edl's: another with
// the same ID is ErrNotOurs.
func (c *Cluster) infoOf(ctx context.Context, edlJob, nomadJob string, stub *api.JobListStub) (jobInfo, bool, error) {
	if in, ok := c.knownInfo(nomadJob, stub); ok {
		return in, true, nil
	}
	nj, _, err := c.client.Jobs().Info(nomadJob, c.q(ctx))
	if notFound(err) {
		return jobInfo{}, false, nil
	}
	if err != nil {
		return jobInfo{}, false, err
	}
	in, err := infoFrom(nj, edlJob)
	if err != nil {
		return jobInfo{}, false, err
	}
	c.cache.mu.Lock()
	c.cache.info[nomadJob] = in
	c.cache.mu.Unlock()
	return in, true, nil
}

// infoFrom checks that nj is edl's job edlJob and takes its group's count.
func infoFrom(nj *api.Job, edlJob string) (jobInfo, error) {
	id := deref(nj.ID)
	if nj.Meta[MetaJobID] != edlJob {
		return jobInfo{}, permanent(&notOursError{id, nj.Meta[MetaJobID]})
	}
	in := jobInfo{version: deref(nj.Version), jobModify: deref(nj.JobModifyIndex), stopped: deref(nj.Stop), count: -1}
	for _, tg := range nj.TaskGroups {
		if deref(tg.Name) == GroupName {
			in.count = deref(tg.Count)
		}
	}
	if in.count < 0 {
		return jobInfo{}, permanent(&noGroupError{id})
	}
	return in, nil
}

// nodeDrains maps node IDs to whether they drain.
func nodeDrains(nodes []*api.NodeListStub) map[string]bool {
	out := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		out[n.ID] = n.Drain
	}
	return out
}
