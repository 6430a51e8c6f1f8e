package nomadtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// NodeSpec describes one fake client node.
type NodeSpec struct {
	Name       string // default node-N
	Datacenter string // default dc1
	// GPUs is the number of healthy nvidia/gpu instances, named gpu0..gpuN-1
	// (or "<Name>-gpuK" when UniqueGPUIDs is set).
	GPUs int
	// UnhealthyGPUs are extra instances reported unhealthy.
	UnhealthyGPUs int
	Model         string // device group name, default H200
	// MemoryMiB, when > 0, is reported as the device attribute "memory" (Int,
	// Unit MiB) the way the NVIDIA plugin does; 0 leaves Attributes null as in
	// the recording's fake plugin.
	MemoryMiB    int
	UniqueGPUIDs bool
	CPUShares    int64    // default 5192 (recorded)
	MemoryMB     int64    // default 24105 (recorded)
	Drivers      []string // healthy drivers, default exec, raw_exec, docker
	Ineligible   bool
	Drain        bool
	Down         bool
}

// Config sets up a Server.
type Config struct {
	// Nodes defaults to one node like the recording: node-1, dc1, four H200
	// instances without attributes.
	Nodes []NodeSpec
	// Token, when set, is the only ACL token accepted (X-Nomad-Token); other
	// requests get 403 "Permission denied".
	Token string
	// Sync runs the scheduler and the fake clients inside the request that
	// triggers them: allocations exist when the register or scale answer
	// comes back, a placed allocation is running and a stopped one complete
	// at once. By default (asynchronous, as Nomad is) a write answers with a
	// pending evaluation; the scheduler places its allocations PlacementDelay
	// later, clients start them StartDelay after placement, and a task told
	// to stop stays client-running for ExitDelay (its devices are free at
	// once: Nomad's accounting frees a desired-stop allocation in the plan).
	Sync bool
	// PlacementDelay (default 20ms), StartDelay (default 30ms) and ExitDelay
	// (default 50ms, at most the task's kill_timeout) tune asynchronous mode.
	PlacementDelay, StartDelay, ExitDelay time.Duration
	// PlacementJitter adds a random [0, PlacementJitter) to each
	// evaluation's delay: Nomad's scheduler workers process evaluations
	// concurrently, so a later write may be placed first.
	PlacementJitter time.Duration
	// TimeScale multiplies the delays taken from job specs (restart delay
	// and its jitter, reschedule delay); 0 means 1. Tests use 0.001.
	TimeScale float64
	// ManualClient keeps new allocations pending until MarkRunning and keeps
	// stopped allocations running until MarkComplete, as a slow client would.
	// Placement stays asynchronous unless Sync is set.
	ManualClient bool
	// Now is the clock for CreateTime, SubmitTime and scaling events.
	Now func() time.Time
	// Logf, when set, receives one line per request.
	Logf func(format string, args ...any)
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Query  string
	Token  string
	Body   []byte
	Status int
}

// Server is a fake Nomad agent (server and clients in one).
type Server struct {
	cfg Config
	ts  *httptest.Server

	mu       sync.Mutex
	index    uint64
	changed  chan struct{}
	nodes    []*node
	jobs     map[string]*jobState // namespace + "/" + id
	allocs   map[string]*allocState
	evals    map[string]*api.Evaluation
	requests []Request
	faults   []*Fault
	latency  time.Duration
	// freed counts changes that may free capacity (stops, exits, node
	// changes): blocked evaluations retry once per change.
	freed uint64
	// timers counts scheduled asynchronous work not yet run; closed stops it.
	timers int
	idle   chan struct{}
	closed bool
	logs   *taskLogs // task logs (logs.go), made on first use
}

// New starts a server; it stops when the test ends.
func New(t interface {
	Helper()
	Cleanup(func())
}, cfg Config) *Server {
	t.Helper()
	s := NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a server the caller must Close.
func NewServer(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PlacementDelay == 0 {
		cfg.PlacementDelay = 20 * time.Millisecond
	}
	if cfg.StartDelay == 0 {
		cfg.StartDelay = 30 * time.Millisecond
	}
	if cfg.ExitDelay == 0 {
		cfg.ExitDelay = 50 * time.Millisecond
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if len(cfg.Nodes) == 0 {
		cfg.Nodes = []NodeSpec{{Name: "node-1", GPUs: 4}}
	}
	s := &Server{
		cfg:     cfg,
		index:   10,
		changed: make(chan struct{}),
		jobs:    map[string]*jobState{},
		allocs:  map[string]*allocState{},
		evals:   map[string]*api.Evaluation{},
	}
	for i, spec := range cfg.Nodes {
		s.nodes = append(s.nodes, newNode(i, spec, s.index))
	}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the agent's address, for api.Config.Address.
func (s *Server) URL() string { return s.ts.URL }

// Close stops the server and its scheduled work.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ts.Close()
}

// after runs f under mu once d has passed (at once, in the caller's lock,
// with Sync). Asynchronous work bumps the index first, as each scheduler or
// client update is a raft write, then retries blocked placements. Callers
// hold mu.
func (s *Server) after(d time.Duration, f func()) {
	if s.cfg.Sync {
		f()
		return
	}
	s.timer(d, f)
}

// timer runs f under mu once d has passed, even with Sync (drain
// deadlines). The returned cancel (callers hold mu) drops it if it has not
// run. Callers hold mu.
func (s *Server) timer(d time.Duration, f func()) (cancel func()) {
	s.timers++
	done := false
	t := time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if done {
			return
		}
		done = true
		s.timers--
		defer s.signalIdle()
		if s.closed {
			return
		}
		s.bump()
		f()
		s.checkDrains()
		s.unblock()
	})
	return func() {
		if !done && t.Stop() {
			done = true
			s.timers--
			s.signalIdle()
		}
	}
}

// signalIdle wakes Settle waiters once no work is scheduled. Callers hold mu.
func (s *Server) signalIdle() {
	if s.timers == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// Settle waits until no asynchronous work is scheduled (evaluations
// placed, clients caught up), or timeout passes; it reports whether the
// server settled. Restart and drain timers count as work.
func (s *Server) Settle(timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		if s.timers == 0 {
			s.mu.Unlock()
			return true
		}
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		ch := s.idle
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// placementDelay is one evaluation's delay. Callers hold mu.
func (s *Server) placementDelay() time.Duration {
	d := s.cfg.PlacementDelay
	if j := s.cfg.PlacementJitter; j > 0 {
		d += time.Duration(mrand.Int64N(int64(j)))
	}
	return d
}

// scaled is a job-spec delay under TimeScale.
func (s *Server) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.cfg.TimeScale)
}

// Client returns a real nomad/api client pointed at the server.
func (s *Server) Client() *api.Client {
	c, err := api.NewClient(&api.Config{Address: s.ts.URL, SecretID: s.cfg.Token})
	if err != nil {
		panic(fmt.Sprintf("nomadtest: client: %v", err))
	}
	return c
}

// Requests returns the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// bump advances the index and wakes blocking queries. Callers hold mu.
func (s *Server) bump() uint64 {
	s.index++
	close(s.changed)
	s.changed = make(chan struct{})
	return s.index
}

func (s *Server) now() int64 { return s.cfg.Now().UnixNano() }

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func jobKey(ns, id string) string { return ns + "/" + id }

// sortedAllocs returns allocations matching keep, ordered by create index
// then ID. Callers hold mu.
func (s *Server) sortedAllocs(keep func(*allocState) bool) []*allocState {
	var out []*allocState
	for _, a := range s.allocs {
		if keep(a) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].a.CreateIndex != out[j].a.CreateIndex {
			return out[i].a.CreateIndex < out[j].a.CreateIndex
		}
		return out[i].a.ID < out[j].a.ID
	})
	return out
}

// Validate names the field at fault; zero values take the defaults.
func (c Config) Validate() error {
	switch {
	case c.PlacementDelay < 0 || c.StartDelay < 0 || c.ExitDelay < 0 || c.PlacementJitter < 0:
		return fmt.Errorf("nomadtest: PlacementDelay %s, StartDelay %s, ExitDelay %s, PlacementJitter %s: must not be negative",
			c.PlacementDelay, c.StartDelay, c.ExitDelay, c.PlacementJitter)
	case c.TimeScale < 0:
		return fmt.Errorf("nomadtest: TimeScale %g: must not be negative", c.TimeScale)
	}
	for i, n := range c.Nodes {
		if n.GPUs < 0 {
			return fmt.Errorf("nomadtest: Nodes[%d].GPUs %d: must not be negative", i, n.GPUs)
		}
	}
	return nil
}
