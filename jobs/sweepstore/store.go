package sweepstore

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
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/redis/go-redis/v9"
)

// Config tunes a Store; the zero value is usable.
type Config struct {
	// Prefix starts every key (default "edl:"), the job store's prefix.
	Prefix string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// IdempotencyTTL is how long an Idempotency-Key is remembered (default 24h).
	IdempotencyTTL time.Duration
	// EventsMaxLen caps each sweep's event log (default 10000).
	EventsMaxLen int64
}

// Store keeps sweeps in Redis.
//
// Keys (prefix p):
//
//	p{<sweep>}:sweep          hash: v = version, d = the Sweep as JSON, t = tenant, s = sequence
//	p{<sweep>}:sweepevents    stream of events, field e = the Event as JSON
//	p tenant:<t>:sweeps       zset: creation sequence -> sweep id (listing, newest first)
//	p sweeps:active           zset: creation sequence -> sweep id, sweeps not terminal
//	p sweeps:seq              counter giving each sweep its creation sequence
//	p sweepidem:<t>:<sha256>  "<sweep id> <spec sha256>", for Idempotency-Key (TTL)
type Store struct {
	rdb redis.UniversalClient
	cfg Config
}

// New returns a store over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = "edl:"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.EventsMaxLen <= 0 {
		cfg.EventsMaxLen = 10000
	}
	return &Store{rdb: rdb, cfg: cfg}
}

func (s *Store) key(id string) string       { return s.cfg.Prefix + "{" + id + "}:sweep" }
func (s *Store) eventsKey(id string) string { return s.cfg.Prefix + "{" + id + "}:sweepevents" }
func (s *Store) tenantKey(t string) string  { return s.cfg.Prefix + "tenant:" + t + ":sweeps" }
func (s *Store) activeKey() string          { return s.cfg.Prefix + "sweeps:active" }
func (s *Store) seqKey() string             { return s.cfg.Prefix + "sweeps:seq" }
func (s *Store) idemKey(tenant, key string) string {
	return records.IdemKey(s.cfg.Prefix+"sweepidem:", tenant, key)
}

// casScript replaces a sweep if its version is still the one read.
// KEYS: sweep, active, events. ARGV: expected version, new version, sweep
// JSON, terminal ("1" = out of active), id, events maxlen, then events.
// Returns -1 if gone, 0 on a conflict, else {1, event ids...}.
var casScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return -1 end
if v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
if ARGV[4] == '1' then redis.call('ZREM', KEYS[2], ARGV[5]) end
local out = {1}
for i = 7, #ARGV do
  out[#out+1] = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'e', ARGV[i])
end
return out
`)

// Create validates spec, draws its trials and stores the sweep as
// running. With an idempotencyKey seen before for this tenant it returns
// that sweep and created=false, or jobs.ErrIdempotencyMismatch when the
// spec differs.
func (s *Store) Create(ctx context.Context, tenant string, spec sweep.Spec, idempotencyKey string) (sweep.Sweep, bool, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return sweep.Sweep{}, false, err
	}
	specHash, err := records.SpecHash(idempotencyKey, spec)
	if err != nil {
		return sweep.Sweep{}, false, fmt.Errorf("encode sweep spec: %w", err)
	}
	now := s.cfg.Now().UTC()
	sw := sweep.Sweep{ID: records.NewID("s-", now), Tenant: tenant, State: sweep.Running, Spec: spec,
		Trials: sweep.NewTrials(spec), CreatedAt: now, UpdatedAt: now, Version: 1}
	data, err := json.Marshal(sw)
	if err != nil {
		return sweep.Sweep{}, false, fmt.Errorf("encode sweep: %w", err)
	}
	ev, err := json.Marshal(sweep.Event{Time: now, Type: sweep.EventSubmitted, Message: "submitted",
		Data: map[string]any{"tenant": tenant, "num_trials": spec.NumTrials}})
	if err != nil {
		return sweep.Sweep{}, false, err
	}
	idemVal := records.IdemValue(idempotencyKey, sw.ID, specHash)
	created, prev, err := records.Create(ctx, s.rdb, records.New{ID: sw.ID, Tenant: tenant, Data: data, Event: ev,
		IdemValue: idemVal, IdemTTL: s.cfg.IdempotencyTTL, EventsMaxLen: s.cfg.EventsMaxLen,
		Key: s.key(sw.ID), TenantKey: s.tenantKey(tenant), ActiveKey: s.activeKey(), EventsKey: s.eventsKey(sw.ID),
		IdemKey: s.idemKey(tenant, idempotencyKey), SeqKey: s.seqKey()})
	if err != nil {
		return sweep.Sweep{}, false, fmt.Errorf("create sweep: %w", err)
	}
	if created {
		return sw, true, nil
	}
	prevID, err := records.Replayed(prev, specHash)
	if err != nil {
		return sweep.Sweep{}, false, err
	}
	old, _, err := s.get(ctx, prevID)
	if err != nil {
		return sweep.Sweep{}, false, fmt.Errorf("idempotent replay of %s: %w", prevID, err)
	}
	return old, false, nil
}

// Get returns the sweep with that ID, or jobs.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (sweep.Sweep, error) {
	sw, _, err := s.get(ctx, id)
	return sw, err
}

func (s *Store) get(ctx context.Context, id string) (sweep.Sweep, string, error) {
	return records.Get[sweep.Sweep](ctx, s.rdb, s.key(id), "sweep", id)
}

// Update applies fn to the sweep and writes it back, with the events fn
// returns, if nobody wrote in between; otherwise it retries fn on a fresh
// copy. fn returning an error writes nothing.
func (s *Store) Update(ctx context.Context, id string, fn func(*sweep.Sweep) ([]sweep.Event, error)) (sweep.Sweep, error) {
	for attempt := range 50 {
		old, version, err := s.get(ctx, id)
		if err != nil {
			return sweep.Sweep{}, err
		}
		sw := old
		sw.Trials = append([]sweep.Trial(nil), old.Trials...)
		events, err := fn(&sw)
		if err != nil {
			return sweep.Sweep{}, err
		}
		sw.ID, sw.Tenant, sw.CreatedAt = old.ID, old.Tenant, old.CreatedAt
		sw.Version, sw.UpdatedAt = old.Version+1, s.cfg.Now().UTC()
		ok, err := s.cas(ctx, version, sw, events)
		if err != nil {
			return sweep.Sweep{}, err
		}
		if ok {
			return sw, nil
		}
		if err := periodic.Sleep(ctx, time.Duration(attempt+1)*500*time.Microsecond); err != nil {
			return sweep.Sweep{}, err
		}
	}
	return sweep.Sweep{}, fmt.Errorf("update sweep %s: %w", id, jobs.ErrConflict)
}

func (s *Store) cas(ctx context.Context, version string, sw sweep.Sweep, events []sweep.Event) (bool, error) {
	data, err := json.Marshal(sw)
	if err != nil {
		return false, fmt.Errorf("encode sweep %s: %w", sw.ID, err)
	}
	terminal := "0"
	if sw.State.Terminal() {
		terminal = "1"
	}
	args := []any{version, strconv.FormatInt(sw.Version, 10), data, terminal, sw.ID, s.cfg.EventsMaxLen}
	for _, ev := range events {
		if ev.Time.IsZero() {
			ev.Time = sw.UpdatedAt
		}
		ev.ID = ""
		b, err := json.Marshal(ev)
		if err != nil {
			return false, fmt.Errorf("encode sweep event: %w", err)
		}
		args = append(args, b)
	}
	res, err := casScript.Run(ctx, s.rdb, []string{s.key(sw.ID), s.activeKey(), s.eventsKey(sw.ID)}, args...).Result()
	if err != nil {
		return false, fmt.Errorf("write sweep %s: %w", sw.ID, err)
	}
	_, ok, err := records.CASReply(res)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return false, err
	case err != nil:
		return false, fmt.Errorf("write sweep %s: %w", sw.ID, err)
	}
	return ok, nil
}

// Active lists the sweeps that are not terminal, oldest first, for the
// controller.
func (s *Store) Active(ctx context.Context) ([]sweep.Sweep, error) {
	ids, err := s.rdb.ZRange(ctx, s.activeKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("active sweeps: %w", err)
	}
	out := make([]sweep.Sweep, 0, len(ids))
	for _, id := range ids {
		sw, err := s.Get(ctx, id)
		if errors.Is(err, jobs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sw)
	}
	return out, nil
}

// List returns up to limit (1-500, default 50) of tenant's sweeps, newest
// first, after the cursor next ("" = from the newest), and the cursor of
// the next page ("" on the last).
func (s *Store) List(ctx context.Context, tenant string, limit int, next string) ([]sweep.Sweep, string, error) {
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	max := "+inf"
	if next != "" {
		n, err := strconv.ParseInt(next, 10, 64)
		if err != nil || n < 0 {
			return nil, "", jobs.Invalid("next", "not a cursor of this list")
		}
		max = "(" + next
	}
	zs, err := s.rdb.ZRevRangeByScoreWithScores(ctx, s.tenantKey(tenant), &redis.ZRangeBy{Max: max, Min: "-inf", Count: int64(limit) + 1}).Result()
	if err != nil {
		return nil, "", fmt.Errorf("list sweeps: %w", err)
	}
	cursor := ""
	if len(zs) > limit {
		zs = zs[:limit]
		cursor = strconv.FormatInt(int64(zs[limit-1].Score), 10)
	}
	out := make([]sweep.Sweep, 0, len(zs))
	for _, z := range zs {
		sw, err := s.Get(ctx, z.Member.(string))
		if errors.Is(err, jobs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, sw)
	}
	return out, cursor, nil
}

// Validate names the field at fault; zero values take the defaults.
func (c Config) Validate() error {
	return nonneg.First("sweepstore",
		nonneg.Of("IdempotencyTTL", c.IdempotencyTTL),
		nonneg.Of("EventsMaxLen", c.EventsMaxLen))
}
