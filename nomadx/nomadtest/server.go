package nomadtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
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
	// ManualClient keeps new allocations pending until MarkRunning and keeps
	// stopped allocations running until MarkComplete, as a slow client would.
	// By default an allocation runs as soon as it is placed and a stopped one
	// completes at once.
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
	logs     *taskLogs // task logs (logs.go), made on first use
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

// Close stops the server.
func (s *Server) Close() { s.ts.Close() }

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

// Index is the current raft index.
func (s *Server) Index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
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
