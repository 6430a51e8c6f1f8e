package core

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/internal/pubsub"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// Membership is a worker's place in its job: its member record, its bid
// for leadership, the generations it watches, and the requests to leave
// or stop that reach it off the step loop. It knows nothing of data or
// training state. The built-in Worker holds one (mem); ExecWorker, and so
// live mode, embeds one (its register sets addr first: live mode's
// address is its program's store).
//
// Invariants:
//   - state is the member state this worker last wrote to its record
//     (register writes it only once the write landed), so a member already
//     active need not rewrite its record at a switch.
//   - trainedIn is the generation whose step loop this worker ran last
//     (nil while it joins one and before the first): pureJoin compares the
//     next generation with it.
//   - leaveReq and stopReq only ever go from false to true, set by
//     goroutines off the step loop (SIGTERM, poll); the step loop reads
//     them once per step and turns them into the step's votes, so every
//     member acts on them at the same step boundary.
//   - the leader runs from Run until stopLead: a worker that leaves hands
//     the lease over (leave) or lets it lapse (exit), never both.
type Membership struct {
	Self string // the worker id
	Addr string // the ring address peers dial (Config.Advertise, else the listener's)
	Log  *slog.Logger
	Now  func() time.Time

	Co       *coord.Client
	Leader   *coord.Leader
	Watch    *coord.Watcher
	StopLead context.CancelFunc

	State     coord.MemberState
	TrainedIn *coord.Generation

	LeaveReq atomic.Bool
	StopReq  atomic.Bool
	// Wake, when not nil, gets a token at every request and every event
	// on the job's channel (listen): the program modes' generation wait
	// (waitGen) wakes on it.
	Wake chan struct{}
}

// Register writes this worker's member record in state s (retrying while
// Redis is away) and remembers s once it landed.
func (m *Membership) Register(ctx context.Context, s coord.MemberState) error {
	rec := coord.Member{Addr: m.Addr, State: s, Since: m.Now()}
	err := Retry(ctx, m.Log, "register", func() error { return m.Co.SetMember(ctx, rec) })
	if err == nil {
		m.State = s
	}
	return err
}

// RequestLeave asks the step loop to leave after its current step.
func (m *Membership) RequestLeave() {
	m.LeaveReq.Store(true)
	if m.Watch != nil {
		m.Watch.Poke()
	}
	poke(m.Wake)
}

// requestStop asks the step loop to stop: the job is being cancelled.
func (m *Membership) requestStop() {
	m.StopReq.Store(true)
	poke(m.Wake)
}

// poke wakes whoever waits on ch (a buffered channel of one) without
// blocking: a wake-up already pending covers this one. Membership pokes
// Wake for the generation wait (WaitGen), the committer and the Reporter
// their kick for their loops.
func poke(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Listen pokes on every event of the job's channel (reports, leaves,
// member states, generations, the end).
func (m *Membership) Listen(ctx context.Context, rdb redis.UniversalClient) {
	pubsub.Each(ctx, rdb.Subscribe(ctx, m.Co.Keys().Channel()), func(string) { poke(m.Wake) })
}

// Poll notices, off the step loop, that this worker was marked leaving or
// that the job is being cancelled (the stop key, or the job's state in
// js when there is one).
func (m *Membership) Poll(ctx context.Context, rdb redis.UniversalClient, js JobSource, job string) {
	_ = periodic.Every(ctx, 200*time.Millisecond, func() bool {
		if ms, err := m.Co.Members(ctx); err == nil {
			if rec, ok := ms[m.Self]; ok && rec.State == coord.Leaving {
				m.RequestLeave()
			}
		}
		if n, err := rdb.Exists(ctx, m.Co.Keys().Stop()).Result(); err == nil && n > 0 {
			m.requestStop()
		}
		if js != nil {
			if j, err := js.Get(ctx, job); err == nil && (j.State == jobs.Cancelling || j.State.Terminal()) {
				m.requestStop()
			}
		}
		return true
	})
}

// CancelWhenOver cancels a join of g (its rings, its state transfer) once
// g can no longer complete: a newer generation replaced it, a member of it
// reported it broken, or a member's heartbeat lapsed (it died or froze,
// possibly just before the leader admitted this worker beside it). The
// join then fails at once and the worker reports, instead of waiting for
// a dead peer until JoinTimeout.
func (m *Membership) CancelWhenOver(ctx context.Context, cancel context.CancelFunc, g *coord.Generation) {
	_ = periodic.Every(ctx, 200*time.Millisecond, func() bool {
		why := m.over(ctx, g)
		if why == "" {
			return true
		}
		m.Log.Info("generation over while joining", "gen", g.Number, "why", why)
		cancel()
		return false
	})
}

// over says why g can no longer complete, or "" (also when Redis cannot
// be read: the ring's own timeout still bounds the wait).
func (m *Membership) over(ctx context.Context, g *coord.Generation) string {
	if cur, err := m.Co.ReadGen(ctx); err == nil && cur != nil && cur.Number > g.Number {
		return fmt.Sprintf("generation %d replaced it", cur.Number)
	}
	if reps, err := m.Co.Reports(ctx); err == nil {
		for id, r := range reps {
			if id != m.Self && r.Gen == g.Number {
				return fmt.Sprintf("member %s reported it broken", id)
			}
		}
	}
	if id, err := m.Co.Lapsed(ctx, g, m.Self); err == nil && id != "" {
		return fmt.Sprintf("member %s's heartbeat lapsed", id)
	}
	return ""
}

// NextGen waits for the generation after gen; done: the job is done (or
// ctx ended).
func (m *Membership) NextGen(ctx context.Context, gen int64) (*coord.Generation, bool) {
	for {
		g, done, err := m.Watch.Next(ctx, gen)
		if err == nil {
			return g, done
		}
		if ctx.Err() != nil {
			return nil, true
		}
	}
}

// WaitGen is the program modes' generation wait: it returns a generation
// numbered above after, or done when the job is done, or (nil, false, nil)
// when woken for a leave or a stop or when exited is closed (live mode:
// the program ended; nil: never). It reads Redis every poll and on every
// wake-up (listen, the watcher).
func (m *Membership) WaitGen(ctx context.Context, after int64, poll time.Duration, exited <-chan struct{}) (*coord.Generation, bool, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if m.LeaveReq.Load() || m.StopReq.Load() || isClosed(exited) {
			return nil, false, nil
		}
		if g, done := m.Co.GenAfter(ctx, after); g != nil || done {
			return g, done, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-exited:
		case <-m.Wake:
		case <-m.Watch.Changed():
		case <-t.C:
		}
	}
}

// isClosed reports whether c is closed (a nil c never is).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Report tells the leader this worker's ring of generation gen broke and
// what it applied last (coord.NoState: no training state); it retries
// while Redis is away. A newer generation makes the report moot: the
// script refuses it (coord.ErrStaleReport), and retry gives up at once.
func (m *Membership) Report(ctx context.Context, gen, applied int64) {
	m.Log.Info("reporting broken ring", "gen", gen, "applied", applied)
	_ = Retry(ctx, m.Log, "report", func() error { return m.Co.Report(ctx, gen, applied) })
}

// Leave is the graceful exit from the job (the built-in and the exec
// worker alike): the lease handed to the next member of g (nil: none
// known), the record removed, a "left" event flushed.
func (m *Membership) Leave(ctx context.Context, g *coord.Generation, rep *Reporter) {
	m.StopLead()
	if g != nil {
		for _, id := range g.Members {
			if id != m.Self {
				if err := m.Leader.Handover(ctx, id); err != nil {
					m.Log.Warn("hand over leadership", "err", err)
				}
				break
			}
		}
	}
	if err := m.Co.Leave(ctx); err != nil {
		m.Log.Warn("leave", "err", err)
	}
	rep.Event(jobs.EventWorker, fmt.Sprintf("worker %s left", m.Self), map[string]any{"worker": m.Self})
	rep.Flush(ctx)
}

// Exit removes the record without handing the lease over (it lapses).
func (m *Membership) Exit(ctx context.Context) {
	m.StopLead()
	if err := m.Co.Leave(ctx); err != nil {
		m.Log.Warn("leave", "err", err)
	}
}
