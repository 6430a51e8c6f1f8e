package loop

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/edl-nomad/edl/jobs"
)

// snapshot is the planner's copy of the live jobs, brought up to date each
// round from the store's change index (jobstore.Store.ChangedSince) instead of
// reading and decoding every job: an idle round reads nothing but an empty
// range. A planner that takes over starts with a full read.
type snapshot struct {
	synced bool
	seq    int64
	jobs   map[string]*jobs.Job
	order  []string // job IDs by creation; nil: to be rebuilt
}

func (s *snapshot) refresh(ctx context.Context, store snapshotStore) error {
	if !s.synced {
		// The sequence first: whatever is written after it shows up in
		// the next ChangedSince, even if ListActive saw it already.
		seq, err := store.ChangeSeq(ctx)
		if err != nil {
			return fmt.Errorf("planner snapshot: %w", err)
		}
		// Jobs a worker made terminal that no planner settled yet.
		if err := store.SettleActive(ctx); err != nil {
			return fmt.Errorf("planner snapshot: %w", err)
		}
		all, err := store.ListActive(ctx)
		if err != nil {
			return fmt.Errorf("planner snapshot: %w", err)
		}
		s.jobs = make(map[string]*jobs.Job, len(all))
		for i := range all {
			s.jobs[all[i].ID] = &all[i]
		}
		s.seq, s.synced, s.order = seq, true, nil
		return nil
	}
	changed, next, err := store.ChangedSince(ctx, s.seq)
	if err != nil {
		return fmt.Errorf("planner snapshot: %w", err)
	}
	for _, j := range changed {
		s.put(j)
	}
	s.seq = next
	return s.catchUp(ctx, store)
}

// catchUp reads the jobs that workers wrote since the snapshot has them:
// a worker's store is job-scoped (jobstore.Config.JobScoped), so its
// writes are not in the change index; one pipelined read of versions
// finds them, and a job a worker made terminal is settled (moved to the
// finished queue) here.
func (s *snapshot) catchUp(ctx context.Context, store snapshotStore) error {
	ids := make([]string, 0, len(s.jobs))
	for id, j := range s.jobs {
		if j.State != jobs.Pending {
			ids = append(ids, id)
		}
	}
	vs, err := store.Versions(ctx, ids)
	if err != nil {
		return fmt.Errorf("planner snapshot: %w", err)
	}
	for i, id := range ids {
		if vs[i] <= s.jobs[id].Version {
			continue
		}
		j, err := store.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("planner snapshot: %w", err)
		}
		if err := store.Settle(ctx, j); err != nil {
			return fmt.Errorf("planner snapshot: %w", err)
		}
		s.put(j)
	}
	return nil
}

// put records a job as read or written, unless an equally new copy is
// there already; a terminal job leaves the snapshot.
func (s *snapshot) put(j jobs.Job) {
	if j.State.Terminal() {
		s.remove(j.ID)
		return
	}
	old, ok := s.jobs[j.ID]
	if ok && old.Version > j.Version {
		return
	}
	if !ok {
		s.order = nil
	}
	s.jobs[j.ID] = &j
}

func (s *snapshot) remove(id string) {
	if _, ok := s.jobs[id]; ok {
		delete(s.jobs, id)
		s.order = nil
	}
}

// list is the live jobs, oldest first (shared: do not change them).
func (s *snapshot) list() []*jobs.Job {
	if s.order == nil {
		s.order = make([]string, 0, len(s.jobs))
		for id := range s.jobs {
			s.order = append(s.order, id)
		}
		slices.SortFunc(s.order, func(a, b string) int {
			if c := s.jobs[a].CreatedAt.Compare(s.jobs[b].CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
	}
	out := make([]*jobs.Job, len(s.order))
	for i, id := range s.order {
		out[i] = s.jobs[id]
	}
	return out
}
