package sweepstore

import (
	"context"
	"time"

	"github.com/edl-nomad/edl/jobs/internal/records"
	"github.com/edl-nomad/edl/jobs/sweep"
)

// Events returns up to limit (default 100) events of the sweep after
// afterID ("" = from the start), oldest first.
func (s *Store) Events(ctx context.Context, id, afterID string, limit int) ([]sweep.Event, error) {
	evs, err := records.Events(ctx, s.rdb, s.eventsKey(id), afterID, limit, setEventID)
	return evs, records.Wrap(err, "events of sweep "+id)
}

// WaitEvents is Events that blocks up to block for the first new event;
// no events and no error when block passes.
func (s *Store) WaitEvents(ctx context.Context, id, afterID string, limit int, block time.Duration) ([]sweep.Event, error) {
	evs, err := records.WaitEvents(ctx, s.rdb, s.eventsKey(id), afterID, limit, block, setEventID)
	return evs, records.Wrap(err, "follow events of sweep "+id)
}

func setEventID(ev *sweep.Event, id string) { ev.ID = id }
