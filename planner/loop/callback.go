package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// Callbacks tells a job's callback_url that the job has ended: one POST of
// the job resource as JSON, retried with backoff until a 2xx, a 4xx other
// than 408/429 (the receiver refuses it), or Attempts tries.
type Callbacks struct {
	Client   *http.Client
	Attempts int
	Backoff  time.Duration
	log      *slog.Logger
}

// NewCallbacks returns a notifier with a 10 s timeout per try and 5 tries.
func NewCallbacks(log *slog.Logger) *Callbacks {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Callbacks{Client: &http.Client{Timeout: 10 * time.Second}, Attempts: 5, Backoff: time.Second, log: log.With("component", "callback")}
}

// Notify posts j to its callback_url; it blocks until done, so call it in a
// goroutine. The outcome is returned for the job's event log.
func (c *Callbacks) Notify(ctx context.Context, j jobs.Job) error {
	body, err := json.Marshal(j)
	if err != nil {
		return err
	}
	wait := c.Backoff
	var last error
	for try := 1; try <= c.Attempts; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.Spec.CallbackURL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("callback %s: %w", j.Spec.CallbackURL, err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Edl-Job", j.ID)
		req.Header.Set("X-Edl-State", string(j.State))
		resp, err := c.Client.Do(req)
		if err == nil {
			resp.Body.Close()
			switch {
			case resp.StatusCode < 300:
				return nil
			case resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429:
				return fmt.Errorf("callback %s: refused with %d", j.Spec.CallbackURL, resp.StatusCode)
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		c.log.Warn("callback failed; will retry", "job", j.ID, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	return fmt.Errorf("callback %s: %d tries failed, last: %w", j.Spec.CallbackURL, c.Attempts, last)
}
