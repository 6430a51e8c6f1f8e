package jobstore

import (
	"time"

	"github.com/edl-nomad/edl/jobs/internal/records"
)

// Follower wakes the followers of job event logs (the API's event streams)
// from one shared reader: a single XREAD BLOCK over every followed job's
// log, on one Redis connection, however many streams are open. A follower
// is only told that its job's log may have grown; it reads the new events
// itself (Events, a short non-blocking read). So an idle stream holds no
// Redis connection, where a blocking read per stream would hold one each and
// exhaust the pool (300 idle streams slowed every request to 750 ms).
// Follow takes a job ID; the reader runs while at least one job is
// followed and stops with the last Unfollow; it needs no Run or Close.
type Follower = records.Follower

// NewFollower returns a Follower on the store's Redis. poll bounds each
// blocking read (default 250 ms), which is also how soon a newly followed
// job joins the shared read.
func (s *Store) NewFollower(poll time.Duration) *Follower {
	if s == nil { // a server built without a store (route listings) follows nothing
		return records.NewFollower(nil, poll, nil)
	}
	return records.NewFollower(s.rdb, poll, s.eventsKey)
}
