package api

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// metrics is the server's own registry, so that several servers (tests) can
// live in one process.
type metrics struct {
	reg      *prometheus.Registry
	jobs     *jobMetrics
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	handler  http.Handler // every series
	public   http.Handler // those without a job, tenant or worker label
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
	m.public = promhttp.HandlerFor(publicGatherer(m.reg), promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(method, route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route, method).Observe(d.Seconds())
}

// metricsHandler godoc
//
//	@Summary		Prometheus metrics
//	@Description	Requests by route and code, latency histograms, Go runtime; live jobs by state and tenant, workers, samples/s, loss and checkpoint age per job, GPUs and CPU slots free and held, resizes by kind, checkpoints by result, planner rounds and Decide time (see api/metrics_jobs.go). The series that name a job, tenant or worker need a bearer token: an admin tenant's or the server's --metrics-token. Without a token the answer has only the others, unless a metrics token is set: then it is 401. A tenant's token that is not an admin's is 403.
//	@Tags			operations
//	@Security		BearerAuth
//	@Produce		plain
//	@Success		200	{string}	string	"Prometheus text format"
//	@Failure		401	{object}	Problem	"a token that is not known, or none while the server has a metrics token"
//	@Failure		403	{object}	Problem	"a tenant's token that is not an admin's"
//	@Router			/metrics [get]
func (s *Server) metricsHandler(c echo.Context) error {
	full, err := s.metricsAccess(c)
	if err != nil {
		return err
	}
	if full {
		s.metrics.handler.ServeHTTP(c.Response(), c.Request())
	} else {
		s.metrics.public.ServeHTTP(c.Response(), c.Request())
	}
	return nil
}

// metricsAccess decides what a scrape may read: every series (the metrics
// token or an admin's), only those that name no job, tenant or worker (no
// token, when the server has no metrics token), or nothing.
func (s *Server) metricsAccess(c echo.Context) (full bool, err error) {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	if h == "" {
		if s.cfg.MetricsToken != "" {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="edl"`)
			return false, unauthorized("this server's /metrics needs its metrics token or an admin's token")
		}
		return false, nil
	}
	scheme, token, found := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "Bearer") || len(c.Request().Header.Values(echo.HeaderAuthorization)) > 1 {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="edl"`)
		return false, unauthorized("send Authorization: Bearer <token>")
	}
	if mt := s.cfg.MetricsToken; mt != "" && subtle.ConstantTimeCompare([]byte(token), []byte(mt)) == 1 {
		return true, nil
	}
	tn, ok := s.tenants.Authenticate(token)
	if !ok {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="edl", error="invalid_token"`)
		return false, unauthorized("the token is not known")
	}
	if !tn.Admin {
		return false, newProblem(http.StatusForbidden, ProblemForbidden, "metrics are for operators",
			"/metrics names every tenant's jobs: scrape it with an admin's token or the server's metrics token")
	}
	return true, nil
}

// privateLabels are the labels whose series an anonymous scrape does not get.
var privateLabels = map[string]bool{"job": true, "tenant": true, "worker": true}

// publicGatherer gathers g without the series that carry a private label.
func publicGatherer(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			ms := mf.Metric[:0]
			for _, m := range mf.Metric {
				if !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return privateLabels[l.GetName()] }) {
					ms = append(ms, m)
				}
			}
			if mf.Metric = ms; len(ms) > 0 {
				out = append(out, mf)
			}
		}
		return out, err
	})
}
