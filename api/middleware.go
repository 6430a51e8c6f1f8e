package api

import (
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// observe is the outermost middleware: it runs the error handler itself so
// that the metrics see the status actually sent.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" || c.Response().Status == http.StatusNotFound && route == "/*" {
			route = "unmatched"
		}
		s.metrics.observe(c.Request().Method, route, c.Response().Status, time.Since(start))
		return nil
	}
}

// securityHeaders marks every answer X-Content-Type-Options: nosniff, so
// that a browser never sniffs a JSON or text answer holding a tenant's
// strings (a job name, a program's log) into HTML or a script. It runs
// first, so error answers (echo's 404 and 405, problems) carry it too.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		return next(c)
	}
}

// limitWrite gives every answer a write deadline, so that a client that
// stops reading cannot hold a handler, its goroutine and its buffers for
// ever (the server has no blanket write timeout: streams last): the whole
// answer must be written within WriteTimeout of the request's start, unless
// the handler made it a stream (streamWrites), whose every write then gets
// StreamWriteTimeout. When the deadline passes, the write fails and the
// connection is closed. It runs before observe, so the error answers observe
// writes are bounded too; after a stream it gives the end of the answer
// (net/http's last chunk) a fresh deadline.
func (s *Server) limitWrite(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rc := http.NewResponseController(c.Response().Writer)
		// An error means the writer cannot set deadlines (a test
		// recorder); the answer is then written without one.
		if err := rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
			return next(c)
		}
		c.Set(string(writeDeadlineKey), rc)
		err := next(c)
		if _, ok := c.Response().Writer.(*deadlineWriter); ok {
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
		}
		return err
	}
}

const writeDeadlineKey ctxKey = "write-deadline"

// streamWrites makes the answer a stream for limitWrite: from here on each
// write and flush must be taken by the client within StreamWriteTimeout,
// instead of the whole answer within WriteTimeout. Event streams, logs and
// model downloads call it before they write.
func (s *Server) streamWrites(c echo.Context) {
	rc, ok := c.Get(string(writeDeadlineKey)).(*http.ResponseController)
	res := c.Response()
	if _, done := res.Writer.(*deadlineWriter); !ok || done {
		return
	}
	res.Writer = &deadlineWriter{ResponseWriter: res.Writer, rc: rc, d: s.cfg.StreamWriteTimeout}
}

// deadlineWriter sets a fresh write deadline before every write and flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController (and so echo's Flush) calls.
func (w *deadlineWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// headAsGet serves HEAD as GET wherever GET is (RFC 9110 9.3.2; echo
// routes HEAD nowhere, so it was 405). It wraps the echo handler: echo
// routes a copy of the request that says GET, while net/http, which still
// holds the HEAD, sends the status and headers and no body. HEAD on a
// stream (follow, Accept: text/event-stream) answers as its page does
// instead of holding the connection open.
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		if q := get.URL.Query(); q.Has("follow") {
			q.Del("follow")
			get.URL.RawQuery = q.Encode()
		}
		get.Header.Del(echo.HeaderAccept)
		next.ServeHTTP(w, get)
	})
}

// allowHead names HEAD beside GET in Allow (405 and OPTIONS answers), as
// headAsGet serves it.
func (s *Server) allowHead(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		res := c.Response()
		res.Before(func() {
			h := res.Header()
			if a := h.Get(echo.HeaderAllow); hasMethod(a, http.MethodGet) && !hasMethod(a, http.MethodHead) {
				h.Set(echo.HeaderAllow, a+", "+http.MethodHead)
			}
		})
		return next(c)
	}
}

// hasMethod reports whether an Allow value lists method.
func hasMethod(allow, method string) bool {
	for _, m := range strings.Split(allow, ",") {
		if strings.TrimSpace(m) == method {
			return true
		}
	}
	return false
}

// recover turns a handler panic into a 500 problem, logged with its stack.
func (s *Server) recover(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("handler panic", "path", c.Request().URL.Path, "panic", r, "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// limitBody refuses bodies over MaxBodyBytes with 413, early when the
// Content-Length says so, otherwise when reading passes the limit. A request
// with a body must send all of it within BodyReadTimeout (a read deadline on
// the connection, set here and lifted once readBody has it), so a client
// trickling its body cannot hold a connection and a handler; requests
// without a body, event streams among them, get no read deadline, and
// writes are never bounded by it.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > s.cfg.MaxBodyBytes {
			return tooLarge(s.cfg.MaxBodyBytes)
		}
		if req.Body != nil && req.Body != http.NoBody {
			rc := http.NewResponseController(c.Response())
			// An error means the writer cannot set deadlines (a test
			// recorder); the body is then read without one.
			if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)); err == nil {
				c.Set(string(deadlineKey), rc)
			}
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxBodyBytes)
		return next(c)
	}
}

const deadlineKey ctxKey = "body-deadline"

// liftBodyDeadline clears the read deadline limitBody set, once the body has
// been read: the server's background read of the connection would otherwise
// cancel the request when it passes.
func liftBodyDeadline(c echo.Context) {
	if rc, ok := c.Get(string(deadlineKey)).(*http.ResponseController); ok {
		_ = rc.SetReadDeadline(time.Time{})
	}
}

func bodyTimeout(limit time.Duration) error {
	return newProblem(http.StatusRequestTimeout, ProblemRequestTimeout, "the request body was not sent in time",
		fmt.Sprintf("a body must arrive within %s of the request", limit))
}

func tooLarge(limit int64) error {
	return newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, "request body too large",
		fmt.Sprintf("bodies are limited to %d bytes", limit))
}

// readBody reads the request body after checking its media type is one of want.
func (s *Server) readBody(c echo.Context, want ...string) ([]byte, error) {
	cts := c.Request().Header.Values(echo.HeaderContentType)
	if len(cts) > 1 { // which one would the body be? (RFC 9110: one value)
		return nil, unsupportedMedia(strings.Join(cts, ", "), want...)
	}
	ct := c.Request().Header.Get(echo.HeaderContentType)
	mt, _, err := mime.ParseMediaType(ct)
	ok := false
	for _, w := range want {
		ok = ok || (err == nil && mt == w)
	}
	if !ok {
		return nil, unsupportedMedia(ct, want...)
	}
	if err := identityEncoding(c); err != nil {
		return nil, err
	}
	buf, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		if errors.As(err, &mbe) {
			return nil, tooLarge(s.cfg.MaxBodyBytes)
		}
		if errors.As(err, &ne) && ne.Timeout() {
			c.Response().Header().Set("Connection", "close")
			return nil, bodyTimeout(s.cfg.BodyReadTimeout)
		}
		return nil, newProblem(http.StatusBadRequest, ProblemMalformedJSON, "could not read the body", err.Error())
	}
	liftBodyDeadline(c)
	return buf, nil
}

// identityEncoding refuses a body sent with a Content-Encoding other than
// identity (415, RFC 9110 15.5.16, with Accept-Encoding: identity): the API
// decodes none, and reading a gzip body as JSON, or a plain one labelled
// gzip, would misread what the client sent.
func identityEncoding(c echo.Context) error {
	var codings []string
	for _, v := range c.Request().Header.Values("Content-Encoding") {
		for _, cod := range strings.Split(v, ",") {
			if cod = strings.TrimSpace(cod); cod != "" && !strings.EqualFold(cod, "identity") {
				codings = append(codings, cod)
			}
		}
	}
	if len(codings) == 0 {
		return nil
	}
	c.Response().Header().Set("Accept-Encoding", "identity")
	return newProblem(http.StatusUnsupportedMediaType, ProblemUnsupportedMedia, "unsupported content encoding",
		fmt.Sprintf("got Content-Encoding %q; send the body unencoded (identity)", strings.Join(c.Request().Header.Values("Content-Encoding"), ", ")))
}

type ctxKey string

const tenantKey ctxKey = "tenant"

// authenticate finds the tenant of the bearer token (401 without one).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hs := c.Request().Header.Values(echo.HeaderAuthorization)
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		scheme, token, found := strings.Cut(h, " ")
		if len(hs) > 1 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="edl", error="invalid_request"`)
			return unauthorized("send one Authorization header")
		}
		if h == "" || !found || !strings.EqualFold(scheme, "Bearer") {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="edl"`)
			return unauthorized("send Authorization: Bearer <token>")
		}
		tn, ok := s.tenants.Authenticate(strings.TrimSpace(token))
		if !ok {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="edl", error="invalid_token"`)
			return unauthorized("the token is not known")
		}
		c.Set(string(tenantKey), tn)
		return next(c)
	}
}

func tenantOf(c echo.Context) jobs.Tenant {
	tn, _ := c.Get(string(tenantKey)).(jobs.Tenant)
	return tn
}

// rateLimit applies the tenant's token bucket: 429 with Retry-After.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tn := tenantOf(c)
		if wait, ok := s.limits.allow(tn.Name, tn.RatePerS, tn.Burst); !ok {
			secs := int(math.Ceil(wait.Seconds()))
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			return newProblem(http.StatusTooManyRequests, ProblemRateLimited, "rate limit exceeded",
				fmt.Sprintf("tenant %s may make %.0f requests per second (burst %d)", tn.Name, tn.RatePerS, tn.Burst))
		}
		return next(c)
	}
}

// limiter holds one token bucket per tenant, in this process.
type limiter struct {
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{now: now, buckets: map[string]*bucket{}}
}

// allow takes a token from name's bucket, or says how long until one is due.
func (l *limiter) allow(name string, rate float64, burst int) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[name]
	if !ok {
		b = &bucket{tokens: float64(burst), last: now}
		l.buckets[name] = b
	}
	b.tokens = math.Min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second)), false
}
