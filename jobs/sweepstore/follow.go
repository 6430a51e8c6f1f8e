package sweepstore

import (
	"time"

	"github.com/edl-nomad/edl/jobs/internal/records"
	"github.com/redis/go-redis/v9"
)

// Follower wakes the followers of sweep event logs (the API's sweep event
// streams) from one shared reader, as jobstore.Follower does for jobs: one
// XREAD BLOCK over every followed sweep's log, on one Redis connection, so
// an idle stream holds none (a blocking read per stream held one each, and
// enough of them drained the pool the whole API shares).
type Follower struct {
	store *Store
	f     *records.Follower
}

// NewFollower returns a Follower on the store's Redis. poll bounds each
// blocking read (default 250 ms), which is also how soon a newly followed
// sweep joins the shared read. Its reader runs while a sweep is followed.
func (s *Store) NewFollower(poll time.Duration) *Follower {
	var rdb redis.UniversalClient
	if s != nil { // a server built without a store (route listings) follows nothing
		rdb = s.rdb
	}
	return &Follower{store: s, f: records.NewFollower(rdb, poll)}
}

// Follow registers interest in sweep id's log. The channel receives a value
// (coalesced) whenever the log may have new events, and once when the
// shared reader has taken the sweep in: a caller that reads the log (Events)
// after Follow and again on every wake misses no event. Call the returned
// function to stop.
func (f *Follower) Follow(id string) (<-chan struct{}, func()) {
	return f.f.Follow(f.store.eventsKey(id))
}

// Followed is the number of sweeps followed now (for tests).
func (f *Follower) Followed() int { return f.f.Followed() }
