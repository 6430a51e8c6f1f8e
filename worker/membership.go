package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// membership is a worker's place in its job: its member record, its bid
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
type membership struct {
	self string // the worker id
	addr string // the ring address peers dial (Config.Advertise, else the listener's)
	log  *slog.Logger
	now  func() time.Time

	co       *coord.Client
	leader   *coord.Leader
	watch    *coord.Watcher
	stopLead context.CancelFunc

	state     coord.MemberState
	trainedIn *coord.Generation

	leaveReq atomic.Bool
	stopReq  atomic.Bool
	// wake, when not nil, gets a token at every request and every event
	// on the job's channel (listen): the program modes' generation wait
	// (waitGen) wakes on it.
	wake chan struct{}
}

// register writes this worker's member record in state s (retrying while
// Redis is away) and remembers s once it landed.
func (m *membership) register(ctx context.Context, s coord.MemberState) error {
	rec := coord.Member{Addr: m.addr, State: s, Since: m.now()}
	err := retry(ctx, m.log, "register", func() error { return m.co.SetMember(ctx, rec) })
	if err == nil {
		m.state = s
	}
	return err
}

// requestLeave asks the step loop to leave after its current step.
func (m *membership) requestLeave() {
	m.leaveReq.Store(true)
	if m.watch != nil {
		m.watch.Poke()
	}
	m.poke()
}

// requestStop asks the step loop to stop: the job is being cancelled.
func (m *membership) requestStop() {
	m.stopReq.Store(true)
	m.poke()
}

// poke wakes the generation wait (waitGen), if any.
func (m *membership) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// listen pokes on every event of the job's channel (reports, leaves,
// member states, generations, the end).
func (m *membership) listen(ctx context.Context, rdb redis.UniversalClient) {
	ps := rdb.Subscribe(ctx, m.co.Keys().Channel())
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			m.poke()
		}
	}
}

// poll notices, off the step loop, that this worker was marked leaving or
// that the job is being cancelled (the stop key, or the job's state in
// js when there is one).
func (m *membership) poll(ctx context.Context, rdb redis.UniversalClient, js JobSource, job string) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ms, err := m.co.Members(ctx); err == nil {
			if rec, ok := ms[m.self]; ok && rec.State == coord.Leaving {
				m.requestLeave()
			}
		}
		if n, err := rdb.Exists(ctx, m.co.Keys().Stop()).Result(); err == nil && n > 0 {
			m.requestStop()
		}
		if js != nil {
			if j, err := js.Get(ctx, job); err == nil && (j.State == jobs.Cancelling || j.State.Terminal()) {
				m.requestStop()
			}
		}
	}
}

// cancelOnNewer cancels a join when a newer generation replaces gen.
func (m *membership) cancelOnNewer(ctx context.Context, cancel context.CancelFunc, gen int64) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if g, err := m.co.ReadGen(ctx); err == nil && g != nil && g.Number > gen {
			cancel()
			return
		}
	}
}

// nextGen waits for the generation after gen; done: the job is done (or
// ctx ended).
func (m *membership) nextGen(ctx context.Context, gen int64) (*coord.Generation, bool) {
	for {
		g, done, err := m.watch.Next(ctx, gen)
		if err == nil {
			return g, done
		}
		if ctx.Err() != nil {
			return nil, true
		}
	}
}

// waitGen is the program modes' generation wait: it returns a generation
// numbered above after, or done when the job is done, or (nil, false, nil)
// when woken for a leave or a stop or when exited is closed (live mode:
// the program ended; nil: never). It reads Redis every poll and on every
// wake-up (listen, the watcher).
func (m *membership) waitGen(ctx context.Context, after int64, poll time.Duration, exited <-chan struct{}) (*coord.Generation, bool, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if m.leaveReq.Load() || m.stopReq.Load() || isClosed(exited) {
			return nil, false, nil
		}
		if g, err := m.co.ReadGen(ctx); err == nil && g != nil && g.Number > after {
			return g, false, nil
		}
		if d, err := m.co.Done(ctx); err == nil && d {
			return nil, true, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-exited:
		case <-m.wake:
		case <-m.watch.Changed():
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

// report tells the leader this worker's ring of generation gen broke and
// what it applied last (coord.NoState: no training state); it retries
// while Redis is away. A newer generation makes the report moot: the
// script refuses it (coord.ErrStaleReport), and retry gives up at once.
func (m *membership) report(ctx context.Context, gen, applied int64) {
	m.log.Info("reporting broken ring", "gen", gen, "applied", applied)
	_ = retry(ctx, m.log, "report", func() error { return m.co.Report(ctx, gen, applied) })
}

// leave is the graceful exit from the job (the built-in and the exec
// worker alike): the lease handed to the next member of g (nil: none
// known), the record removed, a "left" event flushed.
func (m *membership) leave(ctx context.Context, g *coord.Generation, rep *reporter) {
	m.stopLead()
	if g != nil {
		for _, id := range g.Members {
			if id != m.self {
				if err := m.leader.Handover(ctx, id); err != nil {
					m.log.Warn("hand over leadership", "err", err)
				}
				break
			}
		}
	}
	if err := m.co.Leave(ctx); err != nil {
		m.log.Warn("leave", "err", err)
	}
	rep.event(jobs.EventWorker, fmt.Sprintf("worker %s left", m.self), map[string]any{"worker": m.self})
	rep.flush(ctx)
}

// exit removes the record without handing the lease over (it lapses).
func (m *membership) exit(ctx context.Context) {
	m.stopLead()
	if err := m.co.Leave(ctx); err != nil {
		m.log.Warn("leave", "err", err)
	}
}
