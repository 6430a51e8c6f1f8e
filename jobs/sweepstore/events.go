package sweepstore

import (
	"context"

	"github.com/edl-nomad/edl/jobs/internal/records"
	"github.com/edl-nomad/edl/jobs/sweep"
)

// Events returns up to limit (default 100) events of the sweep after
// afterID ("" = from the start), oldest first.
func (s *Store) Events(ctx context.Context, id, afterID string, limit int) ([]sweep.Event, error) {
	evs, err := records.Events(ctx, s.rdb, s.eventsKey(id), afterID, limit, setEventID)
	return evs, records.Wrap(err, "events of sweep "+id)
}

func setEventID(ev *sweep.Event, id string) { ev.ID = id }
