package nomadtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// taskLogs is what the fake tasks wrote, by allocation, task and stream.
type taskLogs struct {
	mu      sync.Mutex
	data    map[string][]byte // allocID/task/stream
	changed chan struct{}
}

func logKey(allocID, task, stream string) string { return allocID + "/" + task + "/" + stream }

// logStore returns the server's task logs, made on first use.
func (s *Server) logStore() *taskLogs {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		s.logs = &taskLogs{data: map[string][]byte{}, changed: make(chan struct{})}
	}
	return s.logs
}

// AppendLog adds data to a task's stdout or stderr, as the task writing
// it would; GET /v1/client/fs/logs/<alloc> serves it (followers get it at
// once).
func (s *Server) AppendLog(allocID, task, stream string, data []byte) {
	l := s.logStore()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := logKey(allocID, task, stream)
	l.data[k] = append(l.data[k], data...)
	close(l.changed)
	l.changed = make(chan struct{})
}

// logHeartbeat is how often a followed stream with nothing new gets an
// empty frame (Nomad: 10 s).
const logHeartbeat = 500 * time.Millisecond

// serveLogs answers GET /v1/client/fs/logs/<alloc> like a Nomad client:
// task, type (stdout|stderr), origin (start|end), offset (bytes from the
// origin) and follow; the body is a stream of JSON StreamFrames whose
// Offset is the file offset after their Data. A followed stream ends when
// the allocation is terminal and everything was sent.
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request, allocID string) {
	q := r.URL.Query()
	s.mu.Lock()
	a := s.allocs[allocID]
	var tasks map[string]bool
	if a != nil {
		tasks = map[string]bool{}
		for name := range a.a.TaskStates {
			tasks[name] = true
		}
	}
	s.mu.Unlock()
	task, typ, origin := q.Get("task"), q.Get("type"), q.Get("origin")
	if origin == "" {
		origin = "start"
	}
	offset, err := strconv.ParseInt(q.Get("offset"), 10, 64)
	if q.Get("offset") == "" {
		offset, err = 0, nil
	}
	follow := q.Get("follow") == "true"
	switch {
	case a == nil:
		writeError(w, errf(http.StatusNotFound, "unknown allocation ID %q", allocID), 0)
		return
	case task == "":
		writeError(w, errf(http.StatusBadRequest, "must provide task name"), 0)
		return
	case !tasks[task]:
		writeError(w, errf(http.StatusBadRequest, "unknown task name %q", task), 0)
		return
	case typ != "stdout" && typ != "stderr":
		writeError(w, errf(http.StatusBadRequest, "must provide log type (stdout/stderr)"), 0)
		return
	case origin != "start" && origin != "end":
		writeError(w, errf(http.StatusBadRequest, "origin must be start or end"), 0)
		return
	case err != nil || offset < 0:
		writeError(w, errf(http.StatusBadRequest, "offset must be a non-negative integer"), 0)
		return
	}
	l := s.logStore()
	l.mu.Lock()
	size := int64(len(l.data[logKey(allocID, task, typ)]))
	l.mu.Unlock()
	pos := min(offset, size)
	if origin == "end" {
		pos = max(size-offset, 0)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	flush := func() { _ = rc.Flush() }
	flush()
	enc := json.NewEncoder(w)
	file := "alloc/logs/" + task + "." + typ + ".0"
	for {
		l.mu.Lock()
		data := l.data[logKey(allocID, task, typ)]
		chunk := append([]byte(nil), data[min(pos, int64(len(data))):]...)
		changed := l.changed
		l.mu.Unlock()
		if len(chunk) > 0 {
			pos += int64(len(chunk))
			if err := enc.Encode(api.StreamFrame{Offset: pos, Data: chunk, File: file}); err != nil {
				return
			}
			flush()
			continue
		}
		if !follow || s.allocTerminal(allocID) {
			return
		}
		select {
		case <-changed:
		case <-time.After(logHeartbeat):
			if err := enc.Encode(api.StreamFrame{}); err != nil {
				return
			}
			flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) allocTerminal(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	return a == nil || terminalClient(a.a.ClientStatus)
}

// Unwrap lets http.ResponseController reach the real writer (to flush a
// followed log).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
