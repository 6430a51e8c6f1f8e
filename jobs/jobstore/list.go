package jobstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// maxScan bounds how many index entries one filtered List examines; a
// page may come back short with a next cursor when filters are sparse.
const maxScan = 5000

// matches reports whether a job in state with labels is one q keeps.
func matches(q jobs.ListQuery, state jobs.State, labels map[string]string) bool {
	if len(q.States) > 0 {
		ok := false
		for _, s := range q.States {
			ok = ok || state == s
		}
		if !ok {
			return false
		}
	}
	for k, v := range q.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Cursors are opaque to clients: "c1." + base64url(creation sequence). A job's
// sequence never changes and new jobs get larger ones, so a cursor keeps
// pointing at the same place however many jobs are added meanwhile.
func encodeCursor(seq int64) string {
	return "c1." + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(seq, 10)))
}

func decodeCursor(c string) (int64, error) {
	raw, ok := strings.CutPrefix(c, "c1.")
	if ok {
		if b, err := base64.RawURLEncoding.DecodeString(raw); err == nil {
			if seq, err := strconv.ParseInt(string(b), 10, 64); err == nil && seq > 0 {
				return seq, nil
			}
		}
	}
	return 0, jobs.Invalid("cursor", "not a cursor this API returned")
}

// List returns one page of the tenant's jobs, newest first, and the cursor of
// the next page ("" when there is none): ListJSON's page, decoded.
func (s *Store) List(ctx context.Context, q jobs.ListQuery) ([]jobs.Job, string, error) {
	raws, next, err := s.ListJSON(ctx, q)
	if err != nil {
		return nil, "", err
	}
	var page []jobs.Job
	for _, raw := range raws {
		var j jobs.Job
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, "", fmt.Errorf("decode job: %w", err)
		}
		page = append(page, j)
	}
	return page, next, nil
}

// jobHeader is the part of a stored job that filters look at.
type jobHeader struct {
	State jobs.State `json:"state"`
	Spec  struct {
		Labels map[string]string `json:"labels"`
	} `json:"spec"`
}

// ListJSON is List returning each job as the JSON the store holds, which
// spares the API decoding and re-encoding whole jobs.
func (s *Store) ListJSON(ctx context.Context, q jobs.ListQuery) ([]json.RawMessage, string, error) {
	filtered := len(q.States) > 0 || len(q.Labels) > 0
	var page []json.RawMessage
	next, err := s.scan(ctx, q, func(raw []byte) (bool, error) {
		if filtered {
			var h jobHeader
			if err := json.Unmarshal(raw, &h); err != nil {
				return false, fmt.Errorf("decode job: %w", err)
			}
			if !matches(q, h.State, h.Spec.Labels) {
				return false, nil
			}
		}
		page = append(page, raw)
		return true, nil
	})
	if err != nil {
		return nil, "", err
	}
	return page, next, nil
}

// scan walks the tenant's index from the cursor, newest first, offering each
// stored job to keep until it has kept q.Limit, and returns the next cursor.
func (s *Store) scan(ctx context.Context, q jobs.ListQuery, keep func(raw []byte) (bool, error)) (string, error) {
	if q.Limit == 0 {
		q.Limit = jobs.DefaultListLimit
	}
	if q.Limit < 1 || q.Limit > jobs.MaxListLimit {
		return "", jobs.Invalid("limit", fmt.Sprintf("must be between 1 and %d", jobs.MaxListLimit))
	}
	for _, st := range q.States {
		if !st.Valid() {
			return "", jobs.Invalid("status", fmt.Sprintf("unknown state %q", st))
		}
	}
	upper := "+inf"
	if q.Cursor != "" {
		seq, err := decodeCursor(q.Cursor)
		if err != nil {
			return "", err
		}
		upper = "(" + strconv.FormatInt(seq, 10)
	}
	batch := int64(q.Limit + 1)
	if len(q.States) > 0 || len(q.Labels) > 0 {
		batch = int64(min(4*q.Limit+1, 1000))
	}
	kept, scanned := 0, 0
	for {
		entries, err := s.rdb.ZRevRangeByScoreWithScores(ctx, s.tenantKey(q.Tenant), &redis.ZRangeBy{
			Max: upper, Min: "-inf", Count: batch}).Result()
		if err != nil {
			return "", fmt.Errorf("list jobs of %s: %w", q.Tenant, err)
		}
		raws, err := s.loadRaw(ctx, entries)
		if err != nil {
			return "", err
		}
		exhausted := int64(len(entries)) < batch
		for i, e := range entries {
			seq := int64(e.Score)
			scanned++
			upper = "(" + strconv.FormatInt(seq, 10)
			if raws[i] == nil {
				continue
			}
			ok, err := keep(raws[i])
			if err != nil {
				return "", err
			}
			if !ok {
				continue
			}
			if kept++; kept == q.Limit {
				if exhausted && i == len(entries)-1 {
					return "", nil
				}
				return encodeCursor(seq), nil
			}
		}
		if exhausted {
			return "", nil
		}
		if scanned >= maxScan {
			return encodeCursor(int64(entries[len(entries)-1].Score)), nil
		}
	}
}

// loadRaw fetches the stored JSON of the jobs named by index entries in one
// round trip; a job that has vanished is nil.
func (s *Store) loadRaw(ctx context.Context, entries []redis.Z) ([][]byte, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(entries))
	for i, e := range entries {
		id, _ := e.Member.(string)
		cmds[i] = pipe.HGet(ctx, s.jobKey(id), "d")
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	out := make([][]byte, len(entries))
	for i, c := range cmds {
		raw, err := c.Bytes()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("load job: %w", err)
		}
		out[i] = raw
	}
	return out, nil
}

// ListActive returns every non-terminal job of every tenant, oldest first:
// the planner's view.
func (s *Store) ListActive(ctx context.Context) ([]jobs.Job, error) {
	entries, err := s.rdb.ZRangeWithScores(ctx, s.activeKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list active jobs: %w", err)
	}
	all, err := s.decodeEntries(ctx, entries)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, j := range all {
		if !j.State.Terminal() {
			out = append(out, j)
		}
	}
	return out, nil
}
