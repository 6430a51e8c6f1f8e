package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is the server's own registry, so that several servers (tests) can
// live in one process.
type metrics struct {
	reg      *prometheus.Registry
	jobs     *jobMetrics
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	handler  http.Handler
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edl_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edl_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method"}),
	}
	m.reg.MustRegister(m.requests, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.jobs = newJobMetrics(s)
	m.jobs.register(m.reg)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(method, route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route, method).Observe(d.Seconds())
}

// metricsHandler godoc
//
//	@Summary	Prometheus metrics
//	@Description	Requests by route and code, latency histograms, Go runtime; live jobs by state and tenant, workers, samples/s, loss and checkpoint age per job, GPUs and CPU slots free and held, resizes by kind, checkpoints by result, planner rounds and Decide time (see api/metrics_jobs.go).
//	@Tags		operations
//	@Produce	plain
//	@Success	200	{string}	string	"Prometheus text format"
//	@Router		/metrics [get]
func (s *Server) metricsHandler(c echo.Context) error {
	s.metrics.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}
