package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/internal/nonneg"
	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/internal/records"
	"github.com/redis/go-redis/v9"
)

// Config tunes a Store; the zero value is usable.
type Config struct {
	// Prefix starts every key (default "edl:"); tests use their own.
	Prefix string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// EventsMaxLen caps each job's event log, oldest trimmed (default 10000).
	EventsMaxLen int64
	// IdempotencyTTL is how long an Idempotency-Key is remembered (default 24h).
	IdempotencyTTL time.Duration
	// MaxRetries bounds optimistic retries of one Update (default 50).
	MaxRetries int
	// ProgressEvery is the least time between two points of a job's
	// progress history (default 1s); ProgressMaxLen caps the points kept
	// per job, oldest trimmed (default 4000). See progress.go.
	ProgressEvery  time.Duration
	ProgressMaxLen int64
	// JobScoped is a worker's store (scoped.go): its writes touch only the
	// keys of the job written (tagged {<job>}), never the global indexes
	// or the notify channel, so that a Redis ACL user limited to one job's
	// keys can make them; the planner brings the indexes up to date.
	JobScoped bool
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = "edl:"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.EventsMaxLen <= 0 {
		c.EventsMaxLen = 10000
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.MaxRetries <= 0 {
		c.MaxRetries = 50
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = defaultProgressEvery
	}
	if c.ProgressMaxLen <= 0 {
		c.ProgressMaxLen = defaultProgressMaxLen
	}
	return c
}

// Store keeps jobs and their event logs in Redis.
//
// Keys (prefix p, default "edl:"):
//
//	p{<job>}:job          hash: v = version, d = the Job as JSON, t = tenant, s = sequence
//	p{<job>}:events       stream of events, field e = the Event as JSON
//	p{<job>}:progress     stream of ProgressPoints, field p = JSON (capped)
//	p tenant:<t>:jobs     zset: creation sequence -> job id (listing, newest first)
//	p active              zset: creation sequence -> job id, non-terminal jobs only
//	p seq                 counter giving each job its creation sequence
//	p idem:<t>:<sha256>   "<job id> <spec sha256>", for Idempotency-Key (TTL)
//	p notify              pub/sub channel: a job id, on submit, cancel or respec
//	p changes             zset: change sequence -> job id, non-terminal jobs only (what changed since)
//	p chgseq              counter giving every write its change sequence
//	p finished            zset: creation sequence -> job id, terminal jobs the planner has not yet
//	                      cleaned up (torn down, callback sent; Job.Planner.Finished)
//	p admit:lock          held while a deadline job is judged and created (LockAdmission)
//	p service             list: the service (GPU seconds) of the newest succeeded jobs the
//	                      planner cleaned up, newest first, at most ServiceHistoryMax
//
// Every write is one Lua script: a create, or a compare-and-set on v, so two
// racing writers never lose an update; the loser re-reads and retries. The
// scripts touch several of these keys, so the store needs a single Redis (or
// a cluster where they share a slot), not a sharded cluster.
type Store struct {
	rdb redis.UniversalClient
	cfg Config
	// fenceKey and fence, when set (WithFence), make every write of this
	// store refused with ErrFenced unless fenceKey still holds fence.
	fenceKey string
	fence    int64
}

// New returns a store over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Store {
	return &Store{rdb: rdb, cfg: cfg.withDefaults()}
}

// Prefix is the key prefix in use.
func (s *Store) Prefix() string { return s.cfg.Prefix }

func (s *Store) jobKey(id string) string    { return s.cfg.Prefix + "{" + id + "}:job" }
func (s *Store) eventsKey(id string) string { return s.cfg.Prefix + "{" + id + "}:events" }
func (s *Store) tenantKey(t string) string  { return s.cfg.Prefix + "tenant:" + t + ":jobs" }
func (s *Store) activeKey() string          { return s.cfg.Prefix + "active" }
func (s *Store) seqKey() string             { return s.cfg.Prefix + "seq" }
func (s *Store) notifyChannel() string      { return s.cfg.Prefix + "notify" }
func (s *Store) changesKey() string         { return s.cfg.Prefix + "changes" }
func (s *Store) chgSeqKey() string          { return s.cfg.Prefix + "chgseq" }
func (s *Store) finishedKey() string        { return s.cfg.Prefix + "finished" }
func (s *Store) serviceKey() string         { return s.cfg.Prefix + "service" }
func (s *Store) idemKey(tenant, key string) string {
	return records.IdemKey(s.cfg.Prefix+"idem:", tenant, key)
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// casScript replaces a job if its version is still the one read.
// KEYS: job, active, events, changes, chgseq, finished, service. ARGV:
// expected version, new version, job JSON, terminal ("0": live, recorded in
// changes; "1": terminal, removed from active and changes and queued in
// finished for the planner; "2": terminal and cleaned up by the planner,
// out of finished too), job id, events maxlen, notify channel ("" = none),
// the job's service to add to the service history when this write takes it
// out of finished ("" = none), then one event JSON per event to append.
// The service is added once: only the write whose ZREM took the job out of
// finished adds it.
// Returns -1 if the job is gone, 0 on a version conflict, else {1, ids...}.
var casScript = redis.NewScript(casSrc)

var casFencedScript = redis.NewScript(fencePrelude + casSrc)

// casSrc is a var: the history's cap is written into it from ServiceHistoryMax.
var casSrc = `
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return -1 end
if v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
if ARGV[4] == '0' then
  redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[5])
else
  redis.call('ZREM', KEYS[2], ARGV[5])
  redis.call('ZREM', KEYS[4], ARGV[5])
  if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[6], tonumber(redis.call('HGET', KEYS[1], 's') or '0'), ARGV[5])
  elseif redis.call('ZREM', KEYS[6], ARGV[5]) == 1 and ARGV[8] ~= '' then
    redis.call('LPUSH', KEYS[7], ARGV[8])
    redis.call('LTRIM', KEYS[7], 0, ` + strconv.Itoa(ServiceHistoryMax-1) + `)
  end
end
local out = {1}
for i = 9, #ARGV do
  out[#out+1] = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'e', ARGV[i])
end
if ARGV[7] ~= '' then redis.call('PUBLISH', ARGV[7], ARGV[5]) end
return out
`

// Create stores a new pending job for tenant. With an idempotencyKey seen
// before for this tenant it returns that job and created=false, or
// ErrIdempotencyMismatch if the spec differs. The spec is defaulted and
// validated here too (*ValidationError).
func (s *Store) Create(ctx context.Context, tenant string, spec jobs.Spec, idempotencyKey string) (jobs.Job, bool, error) {
	job, _, created, err := s.CreateJSON(ctx, tenant, spec, idempotencyKey)
	return job, created, err
}

// CreateJSON is Create that also returns the JSON stored for a new job (as
// GetJSON would return it), for callers that send it on without encoding
// the job again; it is nil when an idempotent replay returns an older job.
func (s *Store) CreateJSON(ctx context.Context, tenant string, spec jobs.Spec, idempotencyKey string) (jobs.Job, []byte, bool, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return jobs.Job{}, nil, false, err
	}
	// The spec's hash only serves to compare replays of one key.
	specHash, err := records.SpecHash(idempotencyKey, spec)
	if err != nil {
		return jobs.Job{}, nil, false, fmt.Errorf("encode spec: %w", err)
	}
	now := s.cfg.Now().UTC()
	job := jobs.Job{
		ID: records.NewID("j-", now), Tenant: tenant, State: jobs.Pending, Reason: "waiting for the planner",
		Spec: spec, CreatedAt: now, UpdatedAt: now, Version: 1,
	}
	if spec.HasDeadline() {
		due := spec.DeadlineAt(now)
		job.Deadline = &due
	}
	data, err := json.Marshal(job)
	if err != nil {
		return jobs.Job{}, nil, false, fmt.Errorf("encode job: %w", err)
	}
	ev, err := json.Marshal(jobs.Event{Time: now, Type: jobs.EventState, Message: "submitted",
		Data: map[string]any{"to": string(jobs.Pending), "tenant": tenant}})
	if err != nil {
		return jobs.Job{}, nil, false, err
	}
	idemVal := records.IdemValue(idempotencyKey, job.ID, specHash)
	created, prev, err := records.Create(ctx, s.rdb, records.New{ID: job.ID, Tenant: tenant, Data: data, Event: ev,
		IdemValue: idemVal, IdemTTL: s.cfg.IdempotencyTTL, EventsMaxLen: s.cfg.EventsMaxLen,
		Key: s.jobKey(job.ID), TenantKey: s.tenantKey(tenant), ActiveKey: s.activeKey(), EventsKey: s.eventsKey(job.ID),
		IdemKey: s.idemKey(tenant, idempotencyKey), SeqKey: s.seqKey(),
		ChangesKey: s.changesKey(), ChangeSeqKey: s.chgSeqKey(), Notify: s.notifyChannel()})
	if err != nil {
		return jobs.Job{}, nil, false, fmt.Errorf("create job: %w", err)
	}
	if created {
		return job, data, true, nil
	}
	old, err := s.replayed(ctx, prev, specHash)
	return old, nil, false, err
}

// replayed is the job an idempotency record (prev) names, for a replay
// whose spec hashes to specHash (jobs.ErrIdempotencyMismatch if the record
// was made from another spec).
func (s *Store) replayed(ctx context.Context, prev, specHash string) (jobs.Job, error) {
	prevID, err := records.Replayed(prev, specHash)
	if err != nil {
		return jobs.Job{}, err
	}
	old, err := s.Get(ctx, prevID)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("idempotent replay of %s: %w", prevID, err)
	}
	return old, nil
}

// Replay answers what Create with idempotencyKey would replay, without
// creating anything: the job the key made before from the same spec
// (found), jobs.ErrIdempotencyMismatch when it made one from another spec,
// found false when the key made none (no key, or its record expired). The
// API asks it before admission control, so that a retried deadline job is
// the job admitted, not a second copy put through admission.
func (s *Store) Replay(ctx context.Context, tenant string, spec jobs.Spec, idempotencyKey string) (jobs.Job, bool, error) {
	if idempotencyKey == "" {
		return jobs.Job{}, false, nil
	}
	specHash, err := records.SpecHash(idempotencyKey, spec.WithDefaults())
	if err != nil {
		return jobs.Job{}, false, fmt.Errorf("encode spec: %w", err)
	}
	prev, err := s.rdb.Get(ctx, s.idemKey(tenant, idempotencyKey)).Result()
	if errors.Is(err, redis.Nil) {
		return jobs.Job{}, false, nil
	}
	if err != nil {
		return jobs.Job{}, false, fmt.Errorf("idempotency record: %w", err)
	}
	old, err := s.replayed(ctx, prev, specHash)
	if err != nil {
		return jobs.Job{}, false, err
	}
	return old, true, nil
}

// Get returns the job with that ID, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (jobs.Job, error) {
	job, _, err := s.get(ctx, id)
	return job, err
}

// GetJSON returns a job's tenant and the JSON the store holds for it, for
// callers that pass the job on without looking inside (the API's GET).
func (s *Store) GetJSON(ctx context.Context, id string) (string, []byte, error) {
	if !records.ValidID(id) {
		return "", nil, jobs.ErrNotFound
	}
	vals, err := s.rdb.HMGet(ctx, s.jobKey(id), "t", "d").Result()
	if err != nil {
		return "", nil, fmt.Errorf("get job %s: %w", id, err)
	}
	t, _ := vals[0].(string)
	d, _ := vals[1].(string)
	if t == "" || d == "" {
		return "", nil, jobs.ErrNotFound
	}
	return t, []byte(d), nil
}

func (s *Store) get(ctx context.Context, id string) (jobs.Job, string, error) {
	return records.Get[jobs.Job](ctx, s.rdb, s.jobKey(id), "job", id)
}

// Update applies fn to the job and writes it back if nobody wrote in between,
// retrying fn on a fresh copy otherwise. fn must not keep the pointer. A state
// change must be allowed by the table (ErrInvalidTransition) and is logged as
// a state event in the same write.
func (s *Store) Update(ctx context.Context, id string, fn func(*jobs.Job) error) (jobs.Job, error) {
	job, _, err := s.UpdateWith(ctx, id, func(j *jobs.Job) ([]jobs.Event, error) { return nil, fn(j) })
	return job, err
}

// UpdateWith is Update where fn also returns events to append atomically with
// the change (a scaling decision with its reason, say). It returns the job
// written and the events as stored (with their IDs).
func (s *Store) UpdateWith(ctx context.Context, id string, fn func(*jobs.Job) ([]jobs.Event, error)) (jobs.Job, []jobs.Event, error) {
	for attempt := 0; attempt < s.cfg.MaxRetries; attempt++ {
		old, version, err := s.get(ctx, id)
		if err != nil {
			return jobs.Job{}, nil, err
		}
		job := old.Clone()
		events, err := fn(&job)
		if err != nil {
			return jobs.Job{}, nil, err
		}
		job.ID, job.Tenant, job.CreatedAt = old.ID, old.Tenant, old.CreatedAt
		now := s.cfg.Now().UTC()
		notify := job.Spec.Workers != old.Spec.Workers || job.Spec.Priority != old.Spec.Priority ||
			job.Workers.Pinned != old.Workers.Pinned
		if job.State != old.State {
			if !jobs.CanTransition(old.State, job.State) {
				return jobs.Job{}, nil, &jobs.TransitionError{From: old.State, To: job.State}
			}
			data := map[string]any{"from": string(old.State), "to": string(job.State)}
			if job.Reason != "" {
				data["reason"] = job.Reason
			}
			events = append([]jobs.Event{{Type: jobs.EventState, Message: string(old.State) + " -> " + string(job.State), Data: data}}, events...)
			notify = notify || job.State == jobs.Cancelling
		}
		job.Version = old.Version + 1
		job.UpdatedAt = now
		stored, ok, err := s.cas(ctx, version, job, events, notify)
		if err != nil {
			return jobs.Job{}, nil, err
		}
		if ok {
			if job.State.Terminal() && !old.State.Terminal() {
				// Best effort: the change is written, and the job keeps its
				// last progress itself; a failed history write must not
				// make the caller think the change was not.
				_ = s.recordFinalProgress(ctx, job)
			}
			return job, stored, nil
		}
		if err := backoff(ctx, attempt); err != nil {
			return jobs.Job{}, nil, err
		}
	}
	return jobs.Job{}, nil, fmt.Errorf("update job %s: %w after %d attempts", id, jobs.ErrConflict, s.cfg.MaxRetries)
}

// cas writes job if its stored version is still version.
func (s *Store) cas(ctx context.Context, version string, job jobs.Job, events []jobs.Event, notify bool) ([]jobs.Event, bool, error) {
	data, err := json.Marshal(job)
	if err != nil {
		return nil, false, fmt.Errorf("encode job %s: %w", job.ID, err)
	}
	terminal := "0"
	if job.State.Terminal() {
		terminal = "1"
		if job.Planner != nil && job.Planner.Finished {
			terminal = "2"
		}
	}
	channel := ""
	if notify {
		channel = s.notifyChannel()
	}
	args := []any{version, strconv.FormatInt(job.Version, 10), data, terminal, job.ID, s.cfg.EventsMaxLen, channel, serviceOf(job)}
	for i := range events {
		if events[i].Time.IsZero() {
			events[i].Time = job.UpdatedAt
		}
		ev := events[i]
		ev.ID = ""
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, false, fmt.Errorf("encode event: %w", err)
		}
		args = append(args, b)
	}
	keys := []string{s.jobKey(job.ID), s.activeKey(), s.eventsKey(job.ID), s.changesKey(), s.chgSeqKey(), s.finishedKey(), s.serviceKey()}
	script := casScript
	if s.cfg.JobScoped {
		script, keys, args[6] = casScopedScript, []string{keys[0], keys[2]}, ""
	}
	if s.fenceKey != "" {
		script, keys, args = casFencedScript, append(keys, s.fenceKey), append(args, s.fence)
	}
	res, err := script.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil {
		if isFenced(err) {
			return nil, false, fmt.Errorf("write job %s: %w", job.ID, jobs.ErrFenced)
		}
		return nil, false, fmt.Errorf("write job %s: %w", job.ID, err)
	}
	ids, ok, err := records.CASReply(res)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return nil, false, err
	case err != nil:
		return nil, false, fmt.Errorf("write job %s: %w", job.ID, err)
	case !ok:
		return nil, false, nil
	}
	for i := range events {
		if i < len(ids) {
			events[i].ID = ids[i]
		}
	}
	return events, true, nil
}

// Transition moves a job to state to with a reason, if the table allows it.
func (s *Store) Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error) {
	return s.Update(ctx, id, func(j *jobs.Job) error {
		if !jobs.CanTransition(j.State, to) {
			return &jobs.TransitionError{From: j.State, To: to}
		}
		j.State, j.Reason = to, reason
		return nil
	})
}

// SetProgress records what the workers report, and adds it to the job's
// progress history.
func (s *Store) SetProgress(ctx context.Context, id string, p jobs.Progress) error {
	var prev jobs.Progress
	j, err := s.Update(ctx, id, func(j *jobs.Job) error { prev, j.Progress = j.Progress, p; return nil })
	if err != nil {
		return err
	}
	return s.recordProgress(ctx, j, prev)
}

// SetWorkers records how many workers a job has and how many it should have.
func (s *Store) SetWorkers(ctx context.Context, id string, current, target int) error {
	_, err := s.Update(ctx, id, func(j *jobs.Job) error {
		j.Workers.Current, j.Workers.Target = current, target
		return nil
	})
	return err
}

// SetCheckpoint records a committed checkpoint and logs it as an event.
func (s *Store) SetCheckpoint(ctx context.Context, id string, ref jobs.CheckpointRef) error {
	_, _, err := s.UpdateWith(ctx, id, func(j *jobs.Job) ([]jobs.Event, error) {
		r := ref
		j.LastCheckpoint = &r
		return []jobs.Event{{Type: jobs.EventCheckpoint, Message: fmt.Sprintf("checkpoint at step %d committed", ref.Step),
			Data: map[string]any{"step": ref.Step, "epoch": ref.Epoch, "url": ref.URL, "size_bytes": ref.SizeBytes}}}, nil
	})
	return err
}

func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(attempt+1) * 200 * time.Microsecond
	if d > 20*time.Millisecond {
		d = 20 * time.Millisecond
	}
	return periodic.Sleep(ctx, d)
}

// Validate names the field at fault; zero values take the defaults.
func (c Config) Validate() error {
	return nonneg.First("jobstore",
		nonneg.Of("EventsMaxLen", c.EventsMaxLen),
		nonneg.Of("IdempotencyTTL", c.IdempotencyTTL),
		nonneg.Of("MaxRetries", c.MaxRetries),
		nonneg.Of("ProgressEvery", c.ProgressEvery),
		nonneg.Of("ProgressMaxLen", c.ProgressMaxLen))
}
