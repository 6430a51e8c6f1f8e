package builtin

import (
	"log/slog"
	"strings"
	"time"
)

// switchTrace times the phases of one generation switch, from the step
// that decided it to the first step applied in the new generation, so the
// stall of an existing member can be read off its log ("switch timings").
type switchTrace struct {
	start, last time.Time
	b           strings.Builder
}

func (t *switchTrace) begin() {
	t.start = time.Now()
	t.last = t.start
	t.b.Reset()
}

// mark records the time since the previous mark under name (no-op when no
// switch is being traced).
func (t *switchTrace) mark(name string) {
	if t.start.IsZero() {
		return
	}
	now := time.Now()
	if t.b.Len() > 0 {
		t.b.WriteByte(' ')
	}
	t.b.WriteString(name)
	t.b.WriteByte('=')
	t.b.WriteString(now.Sub(t.last).Round(100 * time.Microsecond).String())
	t.last = now
}

// end logs the phases once the first step of gen is applied and returns
// the switch's total (0 when no switch was being traced).
func (t *switchTrace) end(log *slog.Logger, gen int64) time.Duration {
	if t.start.IsZero() {
		return 0
	}
	total := time.Since(t.start)
	log.Info("switch timings", "gen", gen, "total", total.Round(100*time.Microsecond), "phases", t.b.String())
	t.start = time.Time{}
	return total
}
