package nomadtest

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// serveHTTP records the request, applies faults and the ACL check, and
// routes it.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	token := r.Header.Get("X-Nomad-Token")
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Token: token, Body: body})
	n := len(s.requests) - 1
	latency := s.latency
	var fault *Fault
	for _, f := range s.faults {
		if f.Times > 0 && (f.Method == "" || f.Method == r.Method) && strings.HasPrefix(r.URL.Path, f.PathPrefix) {
			f.Times--
			fault = f
			break
		}
	}
	s.mu.Unlock()
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		s.requests[n].Status = rec.status
		s.mu.Unlock()
		if s.cfg.Logf != nil {
			s.cfg.Logf("nomadtest: %s %s -> %d", r.Method, r.URL.RequestURI(), rec.status)
		}
	}()
	delay := latency
	if fault != nil {
		delay += fault.Delay
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if fault != nil && fault.Status != 0 {
		writeError(rec, &apiError{status: fault.Status, body: fault.Body}, 0)
		return
	}
	if s.cfg.Token != "" && token != s.cfg.Token {
		writeError(rec, errf(http.StatusForbidden, "Permission denied"), 0)
		return
	}
	s.route(rec, r, body)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

// Flush passes streaming answers (the event stream) on at once.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func namespace(r *http.Request) string {
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	return "default"
}

// route dispatches the endpoints nomadx and the recordings use.
func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
	p := strings.TrimPrefix(r.URL.Path, "/v1/")
	parts := strings.Split(p, "/")
	write := r.Method == http.MethodPut || r.Method == http.MethodPost
	ns := namespace(r)
	switch {
	case p == "jobs" && write:
		var req api.JobRegisterRequest
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, errf(http.StatusBadRequest, "%s", err), 0)
			return
		}
		s.writeResult(w, func() (any, *apiError) { return s.register(&req, ns) }, false)
	case parts[0] == "job" && len(parts) == 2 && r.Method == http.MethodGet:
		s.read(w, r, func() (any, *apiError) { return s.jobView(parts[1], ns) })
	case parts[0] == "job" && len(parts) == 2 && r.Method == http.MethodDelete:
		s.writeResult(w, func() (any, *apiError) {
			return s.deregister(parts[1], ns, r.URL.Query().Get("purge") == "true"), nil
		}, false)
	case parts[0] == "job" && len(parts) == 3 && r.Method == http.MethodGet:
		s.read(w, r, func() (any, *apiError) { return s.jobSub(parts[1], parts[2], ns) })
	case parts[0] == "job" && len(parts) == 3 && parts[2] == "scale" && write:
		var req api.ScalingRequest
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, errf(http.StatusBadRequest, "%s", err), 0)
			return
		}
		s.writeResult(w, func() (any, *apiError) { return s.scale(parts[1], ns, &req) }, false)
	case parts[0] == "allocation" && len(parts) == 2 && r.Method == http.MethodGet:
		s.read(w, r, func() (any, *apiError) { return s.allocView(parts[1]) })
	case parts[0] == "allocation" && len(parts) == 3 && parts[2] == "stop" && write:
		s.writeResult(w, func() (any, *apiError) { return s.stopAllocation(parts[1]) }, false)
	case parts[0] == "client" && len(parts) == 4 && parts[1] == "allocation" && parts[3] == "signal" && write:
		var req api.AllocSignalRequest
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				writeError(w, errf(http.StatusBadRequest, "%s", err), 0)
				return
			}
		}
		s.writeResult(w, func() (any, *apiError) { return s.signal(parts[2], &req) }, false)
	case p == "jobs" && r.Method == http.MethodGet:
		q := r.URL.Query()
		s.read(w, r, func() (any, *apiError) { return s.jobList(ns, q.Get("prefix"), q.Get("meta") == "true"), nil })
	case p == "event/stream" && r.Method == http.MethodGet:
		s.eventStream(w, r)
	case p == "allocations" && r.Method == http.MethodGet:
		q := r.URL.Query()
		s.read(w, r, func() (any, *apiError) { return s.allocList(ns, q.Get("resources") == "true"), nil })
	case p == "nodes" && r.Method == http.MethodGet:
		res := r.URL.Query().Get("resources") == "true"
		s.read(w, r, func() (any, *apiError) { return s.nodeList(res), nil })
	case parts[0] == "node" && len(parts) == 2 && r.Method == http.MethodGet:
		s.read(w, r, func() (any, *apiError) { return s.nodeView(parts[1]) })
	case len(parts) == 4 && parts[0] == "client" && parts[1] == "fs" && parts[2] == "logs" && r.Method == http.MethodGet:
		s.serveLogs(w, r, parts[3]) // logs.go
	default:
		writeError(w, errf(http.StatusNotFound, "Invalid URL"), 0)
	}
}

// read answers a GET, honouring blocking queries: with ?index=N it waits
// until the index passes N or ?wait runs out. As Nomad's servers do, wait
// is 5 minutes when absent and at most 5 minutes, plus a random stagger of
// up to wait/16 so that many watchers do not all wake at once.
func (s *Server) read(w http.ResponseWriter, r *http.Request, f func() (any, *apiError)) {
	q := r.URL.Query()
	if idx, err := strconv.ParseUint(q.Get("index"), 10, 64); err == nil && idx > 0 {
		deadline := time.NewTimer(blockFor(q.Get("wait")))
		defer deadline.Stop()
		for {
			s.mu.Lock()
			cur, ch := s.index, s.changed
			s.mu.Unlock()
			if cur > idx {
				break
			}
			select {
			case <-ch:
				continue
			case <-deadline.C:
			case <-r.Context().Done():
				return
			}
			break
		}
	}
	s.writeResult(w, f, true)
}

// writeResult runs f and writes its JSON (or its plain-text error) with
// the index headers.
func (s *Server) writeResult(w http.ResponseWriter, f func() (any, *apiError), isRead bool) {
	v, aerr := f()
	s.mu.Lock()
	ix := s.index
	s.mu.Unlock()
	if isRead {
		w.Header().Set("X-Nomad-Knownleader", "true")
		w.Header().Set("X-Nomad-Lastcontact", "0")
	}
	if aerr != nil {
		switch {
		case !isRead:
			ix = 0
		case aerr.unindexed:
			ix = 0
			w.Header().Set("X-Nomad-Index", "0")
		}
		writeError(w, aerr, ix)
		return
	}
	if m, ok := v.(map[string]any); ok && !isRead {
		if i, ok := m["Index"]; ok {
			ix = toUint(i)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, errf(http.StatusInternalServerError, "%s", err), ix)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(ix, 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, bytes.NewReader(b))
}

func toUint(v any) uint64 {
	switch x := v.(type) {
	case uint64:
		return x
	case int:
		return uint64(x)
	}
	return 0
}

// writeError writes Nomad's plain-text error answer.
func writeError(w http.ResponseWriter, e *apiError, index uint64) {
	if index > 0 {
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(e.status)
	_, _ = io.WriteString(w, e.body)
}

// maxBlock is Nomad's longest and default blocking-query wait.
const maxBlock = 5 * time.Minute

// blockFor is how long a blocking query with ?wait=v waits.
func blockFor(v string) time.Duration {
	wait := maxBlock
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		wait = min(d, maxBlock)
	}
	return wait + rand.N(wait/16+1)
}
