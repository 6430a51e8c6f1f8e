package jobstore

import (
	"time"

	"github.com/edl-nomad/edl/jobs/internal/records"
	"github.com/redis/go-redis/v9"
)

// Follower wakes the followers of job event logs (the API's event streams)
// from one shared reader: a single XREAD BLOCK over every followed job's
// log, on one Redis connection, however many streams are open. A follower
// is only told that its job's log may have grown; it reads the new events
// itself (Events, a short non-blocking read). So an idle stream holds no
// Redis connection, where a blocking read per stream would hold one each and
// exhaust the pool (300 idle streams slowed every request to 750 ms).
//
// The reader runs while at least one job is followed and stops with the
// last Unfollow; it needs no Run or Close. (The reader is records.Follower,
// which the sweep store's follower shares.)
type Follower struct {
	store *Store
	f     *records.Follower
}

// NewFollower returns a Follower on the store's Redis. poll bounds each
// blocking read (default 250 ms), which is also how soon a newly followed
// job joins the shared read.
func (s *Store) NewFollower(poll time.Duration) *Follower {
	var rdb redis.UniversalClient
	if s != nil { // a server built without a store (route listings) follows nothing
		rdb = s.rdb
	}
	return &Follower{store: s, f: records.NewFollower(rdb, poll)}
}

// Follow registers interest in job id's log. The returned channel receives
// a value (coalesced: it holds at most one) whenever the log may have new
// events, and once when the shared reader has taken the job in, so that a
// caller which reads the log after Follow and again on every wake misses no
// event. Call the returned function to stop.
func (f *Follower) Follow(id string) (<-chan struct{}, func()) {
	return f.f.Follow(f.store.eventsKey(id))
}

// Followed is the number of jobs followed now (for metrics and tests).
func (f *Follower) Followed() int { return f.f.Followed() }
