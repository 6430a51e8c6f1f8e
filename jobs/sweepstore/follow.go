package sweepstore

import (
	"time"

	"github.com/edl-nomad/edl/jobs/internal/records"
)

// Follower wakes the followers of sweep event logs (the API's sweep event
// streams) from one shared reader, as jobstore.Follower does for jobs (the
// same type); Follow takes a sweep ID.
type Follower = records.Follower

// NewFollower returns a Follower on the store's Redis; poll as
// jobstore.Store.NewFollower's.
func (s *Store) NewFollower(poll time.Duration) *Follower {
	if s == nil { // a server built without a store (route listings) follows nothing
		return records.NewFollower(nil, poll, nil)
	}
	return records.NewFollower(s.rdb, poll, s.eventsKey)
}
