package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/edl-nomad/edl/internal/nonneg"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/labstack/echo/v4"
)

// @title						edl API
// @version					1
// @description				Submit, list, inspect, resize and cancel elastic deep-learning training jobs. Every error is application/problem+json (RFC 9457) with a stable type.
// @license.name				Apache-2.0
// @BasePath					/
// @securityDefinitions.apikey	BearerAuth
// @in							header
// @name						Authorization
// @description				"Bearer <token>"; tokens are listed (as SHA-256) in the tenants file.

// Config tunes the server; the zero value gets the defaults.
type Config struct {
	// MaxBodyBytes caps request bodies (default 1 MiB); more is 413.
	MaxBodyBytes int64
	// BodyReadTimeout is how long a request with a body has to send all of
	// it (default 10s); a slower one gets 408 and its connection closed.
	BodyReadTimeout time.Duration
	// MaxStreamsPerTenant caps the event streams (follow=true) and
	// followed logs one tenant holds open in this process (default 100);
	// more get 429.
	MaxStreamsPerTenant int
	// WriteTimeout bounds the writing of a whole answer that is not a
	// stream (default 60s, counted from the request's start): a client that
	// stops reading a large page is cut off then, and its handler and
	// buffers freed. Streams (StreamWriteTimeout) are not bound by it.
	WriteTimeout time.Duration
	// StreamWriteTimeout bounds each write of a stream (default 30s):
	// event streams, logs (followed or not) and model downloads, whose
	// length has no bound, get a fresh deadline on every write and flush,
	// so a client that does not take a write within it is dropped, however
	// long the stream lasts.
	StreamWriteTimeout time.Duration
	// SSEKeepAlive is how often an idle event stream gets a comment (default 15s).
	SSEKeepAlive time.Duration
	// StoreTimeout bounds each store call of a request (default 5s).
	StoreTimeout time.Duration
	// ShutdownGrace is how long Run waits for requests when ctx ends (default 5s).
	ShutdownGrace time.Duration
	// Now is the clock for rate limits (default time.Now).
	Now func() time.Time
	// Checkpoints serves the checkpoint routes; nil answers them 503.
	Checkpoints CheckpointView
	// PlannerRounds, when the planner runs in this process, counts its
	// rounds for edl_planner_rounds_total (planner.Loop.Rounds).
	PlannerRounds func() int64
	// ExecPolicy is called on every submitted exec spec (execpolicy.go);
	// nil accepts them.
	ExecPolicy ExecPolicy
	// Workers and Membership serve GET /v1/jobs/{id}/workers and find
	// workers for the logs route (workers.go); Logs serves the program logs
	// (logs.go). Nil answers those routes 503.
	Workers    WorkerView
	Membership Membership
	Logs       LogSource
	// MetricsToken, when set, is a bearer token that may read /metrics
	// (besides admin tenants' tokens), and a scrape without a token is
	// refused. Unset, a scrape without a token gets only the series that
	// name no job, tenant or worker (metrics.go).
	MetricsToken string
	// Sweeps serves /v1/sweeps (sweeps.go); nil answers those routes 503.
	Sweeps *sweepstore.Store
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: 1 << 20, BodyReadTimeout: 10 * time.Second, MaxStreamsPerTenant: 100,
		WriteTimeout: 60 * time.Second, StreamWriteTimeout: 30 * time.Second, SSEKeepAlive: 15 * time.Second, StoreTimeout: 5 * time.Second, ShutdownGrace: 5 * time.Second, Now: time.Now}
}

// Validate names the field at fault; zero values take the defaults.
func (c Config) Validate() error {
	if err := nonneg.First("api",
		nonneg.Of("MaxBodyBytes", c.MaxBodyBytes),
		nonneg.Of("BodyReadTimeout", c.BodyReadTimeout),
		nonneg.Of("MaxStreamsPerTenant", c.MaxStreamsPerTenant),
		nonneg.Of("WriteTimeout", c.WriteTimeout),
		nonneg.Of("StreamWriteTimeout", c.StreamWriteTimeout),
		nonneg.Of("SSEKeepAlive", c.SSEKeepAlive),
		nonneg.Of("StoreTimeout", c.StoreTimeout),
		nonneg.Of("ShutdownGrace", c.ShutdownGrace)); err != nil {
		return err
	}
	if t := c.MetricsToken; t != "" && (len(t) < 16 || strings.ContainsAny(t, " \t\r\n")) {
		return errors.New("api: MetricsToken must be at least 16 characters without spaces")
	}
	return nil
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	positiveOr(&c.MaxBodyBytes, d.MaxBodyBytes)
	positiveOr(&c.BodyReadTimeout, d.BodyReadTimeout)
	positiveOr(&c.MaxStreamsPerTenant, d.MaxStreamsPerTenant)
	positiveOr(&c.WriteTimeout, d.WriteTimeout)
	positiveOr(&c.StreamWriteTimeout, d.StreamWriteTimeout)
	positiveOr(&c.SSEKeepAlive, d.SSEKeepAlive)
	positiveOr(&c.StoreTimeout, d.StoreTimeout)
	positiveOr(&c.ShutdownGrace, d.ShutdownGrace)
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}

// positiveOr sets *v to def unless it is positive (a zero Config field
// takes the default).
func positiveOr[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// ClusterView is what GET /v1/cluster needs from the cluster: its capacity.
// nomadx and local satisfy it; nil means no cluster is attached.
type ClusterView interface {
	Capacity(ctx context.Context) (jobs.Capacity, error)
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	store   *jobstore.Store
	tenants *jobs.Tenants
	cluster ClusterView
	log     *slog.Logger
	echo    *echo.Echo
	limits  *limiter
	metrics *metrics
	follow  *jobstore.Follower
	// sweepFollow wakes the sweep event streams (nil without Sweeps).
	sweepFollow *sweepstore.Follower
	streams     *streamCounts
	// draining is closed when Run begins to shut down: streams end.
	draining  chan struct{}
	drainOnce sync.Once
}

// New builds the server and registers its routes.
func New(cfg Config, store *jobstore.Store, tenants *jobs.Tenants, cluster ClusterView, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, store: store, tenants: tenants, cluster: cluster,
		log: logger.With("component", "api"), limits: newLimiter(cfg.Now),
		follow: store.NewFollower(0), streams: newStreamCounts(), draining: make(chan struct{})}
	if cfg.Sweeps != nil {
		s.sweepFollow = cfg.Sweeps.NewFollower(0)
	}
	s.metrics = newMetrics(s)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(securityHeaders, s.limitWrite, s.observe, s.allowHead, s.recover, s.limitBody)
	s.echo = e
	s.routes()
	return s
}

func (s *Server) routes() {
	e := s.echo
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", s.metricsHandler)
	e.GET("/openapi.json", s.openapiJSON)
	e.GET("/openapi.yaml", s.openapiYAML)
	e.GET("/docs", s.docsRedirect)
	e.GET("/docs/*", s.docsUI())
	e.GET("/ui", s.dashboardRedirect)
	e.GET("/ui/*", s.dashboard())

	// Per-route middleware rather than Group(prefix, mw...): echo gives a
	// group with middleware catch-all routes that would turn 405 into 404.
	v1, auth := e.Group("/v1"), []echo.MiddlewareFunc{s.authenticate, s.rateLimit}
	v1.POST("/jobs", s.createJob, auth...)
	v1.GET("/jobs", s.listJobs, auth...)
	v1.GET("/jobs/:id", s.getJob, auth...)
	v1.PATCH("/jobs/:id", s.patchJob, auth...)
	v1.DELETE("/jobs/:id", s.cancelJob, auth...)
	v1.POST("/jobs/:id/scale", s.scaleJob, auth...)
	v1.GET("/jobs/:id/events", s.jobEvents, auth...)
	v1.GET("/jobs/:id/progress", s.jobProgress, auth...)
	v1.GET("/jobs/:id/checkpoints", s.listCheckpoints, auth...)
	v1.GET("/jobs/:id/workers", s.listWorkers, auth...)
	v1.GET("/jobs/:id/logs", s.jobLogs, auth...)
	v1.GET("/jobs/:id/checkpoints/:step/model", s.checkpointModel, auth...)
	v1.GET("/cluster", s.clusterStatus, auth...)
	v1.GET("/tenants/me", s.tenantMe, auth...)
	s.sweepRoutes(v1, auth) // sweeps.go
}

// Handler is the API as an http.Handler (for tests and embedding), HEAD
// served as GET (headAsGet).
func (s *Server) Handler() http.Handler { return headAsGet(s.echo) }

// Routes lists "METHOD path" of every registered route, in echo's syntax.
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// Run serves on ln until ctx ends, then shuts down gracefully: new
// connections stop at once, event and log streams end, and the other
// requests get ShutdownGrace to finish (their contexts do not end with
// ctx). What still runs after the grace has its context cancelled and is
// answered 503 with Retry-After (handleError), then the connections close.
// Callers close the store only after Run returned.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// What net/http answers itself (a malformed request) is bounded
		// by WriteTimeout; every request sets its own deadline (limitWrite),
		// and streams one per write.
		WriteTimeout: s.cfg.WriteTimeout,
		IdleTimeout:  2 * time.Minute,
		BaseContext:  func(net.Listener) context.Context { return reqCtx },
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	go s.metrics.jobs.follow(ctx)
	s.log.Info("api listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("api server: %w", err)
	case <-ctx.Done():
	}
	s.drainOnce.Do(func() { close(s.draining) })
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Grace over: cut what still runs, let it answer 503, then close.
		cancelReqs()
		cut, cancelCut := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(cut)
		cancelCut()
		_ = srv.Close()
		return fmt.Errorf("api shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api server: %w", err)
	}
	return nil
}

// streamCtx is the context of a stream (events, followed logs): it ends
// with the request or as soon as the server begins to shut down, since a
// stream would otherwise hold the shutdown for its whole grace.
func (s *Server) streamCtx(c echo.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.Request().Context())
	go func() {
		select {
		case <-s.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// ListenAndRun listens on addr (host:port) and calls Run.
func (s *Server) ListenAndRun(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("api listen %s: %w", addr, err)
	}
	return s.Run(ctx, ln)
}

// storeCtx bounds a store call made for a request.
func (s *Server) storeCtx(c echo.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Request().Context(), s.cfg.StoreTimeout)
}

func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeJSON answers with v as application/json.
func writeJSON(c echo.Context, status int, v any) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c.Response().WriteHeader(status)
	return jsonEncode(c.Response(), v)
}
