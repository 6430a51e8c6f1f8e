package nomadtest

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EventHeartbeat is how often an idle event stream sends {} (Nomad: 10s).
var EventHeartbeat = 10 * time.Second

// topicFilter is one ?topic=Topic:key of an event stream ("*" matches all).
type topicFilter struct{ topic, key string }

func (f topicFilter) match(topic, key string, filterKeys []string) bool {
	if f.topic != "*" && f.topic != topic {
		return false
	}
	if f.key == "*" || f.key == "" || f.key == key {
		return true
	}
	for _, k := range filterKeys {
		if k == f.key {
			return true
		}
	}
	return false
}

// streamState is what one stream has already sent.
type streamState struct {
	allocs  map[string]allocSeen
	jobs    map[string]jobSeen
	filters []topicFilter
	ns      string
}

type allocSeen struct {
	modify  uint64
	desired string
}

type jobSeen struct {
	modify  uint64
	version uint64
	job     map[string]any
}

// event is one Nomad event on the wire.
type event struct {
	Topic      string
	Type       string
	Key        string
	Namespace  string
	FilterKeys []string // null for Job events, as Nomad sends
	Index      uint64
	Payload    map[string]any
}

// eventStream serves GET /v1/event/stream: NDJSON frames {"Index",
// "Events"} for the Allocation and Job topics (filtered by key or job ID),
// built by comparing the state with what the stream has sent (so several
// changes between two looks come as one event, as a slow Nomad subscriber
// may see), a {} heartbeat at once and every EventHeartbeat.
func (s *Server) eventStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st := &streamState{allocs: map[string]allocSeen{}, jobs: map[string]jobSeen{}, ns: namespace(r)}
	for _, t := range q["topic"] {
		topic, key, _ := strings.Cut(t, ":")
		st.filters = append(st.filters, topicFilter{topic, key})
	}
	if len(st.filters) == 0 {
		st.filters = []topicFilter{{"*", "*"}}
	}
	from, _ := strconv.ParseUint(q.Get("index"), 10, 64)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(v any) bool {
		if err := enc.Encode(v); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !send(struct{}{}) {
		return
	}
	ctx := r.Context()
	beat := time.NewTicker(EventHeartbeat)
	defer beat.Stop()
	for {
		s.mu.Lock()
		frames := s.collectEvents(st, from)
		ch := s.changed
		s.mu.Unlock()
		for _, f := range frames {
			if !send(f) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-beat.C:
			if !send(struct{}{}) {
				return
			}
		}
	}
}

// collectEvents diffs the state against what st has sent. Callers hold mu.
func (s *Server) collectEvents(st *streamState, from uint64) []map[string]any {
	byIndex := map[uint64][]event{}
	add := func(e event) {
		for _, f := range st.filters {
			if f.match(e.Topic, e.Key, e.FilterKeys) {
				byIndex[e.Index] = append(byIndex[e.Index], e)
				return
			}
		}
	}
	for _, a := range s.sortedAllocs(func(a *allocState) bool { return st.ns == "*" || a.a.Namespace == st.ns }) {
		seen, ok := st.allocs[a.a.ID]
		ix := a.a.ModifyIndex
		if ix <= from || (ok && seen.modify == ix) {
			continue
		}
		typ := "AllocationUpdated"
		switch {
		case !ok || seen.desired != a.a.DesiredStatus:
			typ = "PlanResult"
		case a.transition == ix:
			typ = "AllocationUpdateDesiredStatus"
		}
		st.allocs[a.a.ID] = allocSeen{modify: ix, desired: a.a.DesiredStatus}
		m := s.allocWire(a)
		for _, k := range []string{"Job", "TaskStates", "ClientDescription", "NetworkStatus"} {
			delete(m, k)
		}
		add(event{Topic: "Allocation", Type: typ, Key: a.a.ID, Namespace: a.a.Namespace,
			FilterKeys: []string{a.a.JobID, a.a.DeploymentID}, Index: ix, Payload: map[string]any{"Allocation": m}})
	}
	live := map[string]bool{}
	for k, js := range s.jobs {
		if st.ns != "*" && *js.job.Namespace != st.ns {
			continue
		}
		live[k] = true
		seen, ok := st.jobs[k]
		ix := js.modifyIndex
		if ix <= from || (ok && seen.modify == ix) {
			continue
		}
		typ := "PlanResult"
		switch {
		case js.job.Stop != nil && *js.job.Stop:
			typ = "JobDeregistered"
		case !ok || seen.version != js.version:
			typ = "JobRegistered"
		}
		m := jobWire(js.job)
		st.jobs[k] = jobSeen{modify: ix, version: js.version, job: m}
		add(event{Topic: "Job", Type: typ, Key: *js.job.ID, Namespace: *js.job.Namespace, Index: ix, Payload: map[string]any{"Job": m}})
	}
	for k, seen := range st.jobs {
		if !live[k] && seen.job != nil {
			// Purged.
			ns, id, _ := strings.Cut(k, "/")
			add(event{Topic: "Job", Type: "JobDeregistered", Key: id, Namespace: ns, Index: s.index, Payload: map[string]any{"Job": seen.job}})
			delete(st.jobs, k)
		}
	}
	idx := make([]uint64, 0, len(byIndex))
	for i := range byIndex {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	var out []map[string]any
	for _, i := range idx {
		out = append(out, map[string]any{"Index": i, "Events": byIndex[i]})
	}
	return out
}
