package live

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The generation's rendezvous store behind the worker (docs/live.md,
// "The protocol"). The program's torch.distributed.Store (python/edl/
// store.py) sends every store call to its own worker over its socket; the
// worker keeps the generation's keys in one Redis hash per generation,
// under the job's key base (live:store:<gen>). Before, the group was set
// up in rank 0's TCPStore, hosted in rank 0's program: a survivor's store
// client (or server) saw a reset when a program was SIGKILLed, and torch
// 1.13 aborted it from a background thread ("terminate called after
// throwing an instance of 'std::system_error' ... Connection reset by
// peer"), so its worker restarted it without state. Now no program holds
// a connection to another program's store: a dead peer cannot take a
// survivor's store down with it.
//
// The ops (request fields of liveStoreRequest, reply of liveStoreReply):
//
//	store_set       key, value                  -> (nothing)
//	store_get       key, timeout_ms             -> value (waits until the key exists)
//	store_add       key, amount                 -> num (the new value)
//	store_cas       key, expected, value        -> value (desired if swapped, else the current one)
//	store_wait      keys, timeout_ms            -> (nothing) once every key exists
//	store_check     keys                        -> exists (every key exists)
//	store_num_keys                              -> num
//	store_delete    key                         -> exists (it was there)
//
// Every op names its generation (gen): a fresh hash per generation, so no
// stale key breaks re-initialisation; the hash expires liveStoreTTL after
// its last write (the group needs the store only while it is set up). A
// wait (and get) polls every liveStorePoll up to its timeout (at most the
// worker's live timeout and at least one poll), and ends early, with an
// error naming it, when a newer generation replaced gen or the program
// ended.

// liveStoreRequest is the store part of a liveRequest.
type liveStoreRequest struct {
	Key       string   `json:"key"`
	Keys      []string `json:"keys"`
	Value     []byte   `json:"value"`    // base64 in JSON
	Expected  []byte   `json:"expected"` // store_cas
	Amount    int64    `json:"amount"`
	TimeoutMs int64    `json:"timeout_ms"`
}

// liveStoreReply is the store part of a liveReply.
type liveStoreReply struct {
	Value  []byte `json:"value,omitempty"`
	Num    int64  `json:"num,omitempty"`
	Exists bool   `json:"exists,omitempty"`
	// Superseded: a wait ended because a newer generation replaced gen.
	Superseded bool `json:"superseded,omitempty"`
}

const (
	liveStoreTTL  = 10 * time.Minute
	liveStorePoll = 2 * time.Millisecond
)

// errLiveStoreSuperseded: a newer generation replaced the one a wait was for.
var errLiveStoreSuperseded = errors.New("a newer generation replaced it")

// liveStoreCAS is c10d's compareSet on a hash field: an absent key with an
// empty expected value is set; a current value equal to expected is
// replaced; the reply is the value now held (or expected, for an absent
// key and a non-empty expected value, as TCPStore answers).
var liveStoreCAS = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur == false then
  if ARGV[2] == '' then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    return ARGV[3]
  end
  return ARGV[2]
end
if cur == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return ARGV[3]
end
return cur
`)

// liveStore is one worker's view of the generations' stores.
type liveStore struct {
	rdb  redis.UniversalClient
	base string // the job's key base
	// def bounds a wait without a timeout, max every wait.
	def, max time.Duration
	// gone reports whether a wait for generation gen should end now: a
	// newer generation replaced gen (superseded) or the program ended.
	gone func(gen int64) (superseded bool, err error)
}

func (s *liveStore) key(gen int64) string { return s.base + "live:store:" + strconv.FormatInt(gen, 10) }

// isLiveStoreOp reports whether op is one of the store's.
func isLiveStoreOp(op string) bool { return strings.HasPrefix(op, "store_") }

// do answers one store request.
func (s *liveStore) do(ctx context.Context, op string, gen int64, r liveStoreRequest) (liveStoreReply, error) {
	if gen < 1 {
		return liveStoreReply{}, fmt.Errorf("%s: gen %d: want the generation being set up (>= 1)", op, gen)
	}
	h := s.key(gen)
	needKey := func() error {
		if r.Key == "" {
			return fmt.Errorf("%s: key missing", op)
		}
		return nil
	}
	switch op {
	case "store_set":
		if err := needKey(); err != nil {
			return liveStoreReply{}, err
		}
		p := s.rdb.TxPipeline()
		p.HSet(ctx, h, r.Key, r.Value)
		p.PExpire(ctx, h, liveStoreTTL)
		_, err := p.Exec(ctx)
		return liveStoreReply{}, wrapStore(op, err)
	case "store_get":
		if err := needKey(); err != nil {
			return liveStoreReply{}, err
		}
		if rep, err := s.wait(ctx, op, gen, []string{r.Key}, r.TimeoutMs); err != nil {
			return rep, err
		}
		v, err := s.rdb.HGet(ctx, h, r.Key).Bytes()
		return liveStoreReply{Value: v}, wrapStore(op, err)
	case "store_add":
		if err := needKey(); err != nil {
			return liveStoreReply{}, err
		}
		p := s.rdb.TxPipeline()
		n := p.HIncrBy(ctx, h, r.Key, r.Amount)
		p.PExpire(ctx, h, liveStoreTTL)
		if _, err := p.Exec(ctx); err != nil {
			return liveStoreReply{}, wrapStore(op, err)
		}
		return liveStoreReply{Num: n.Val()}, nil
	case "store_cas":
		if err := needKey(); err != nil {
			return liveStoreReply{}, err
		}
		v, err := liveStoreCAS.Run(ctx, s.rdb, []string{h}, r.Key, r.Expected, r.Value, liveStoreTTL.Milliseconds()).Text()
		return liveStoreReply{Value: []byte(v)}, wrapStore(op, err)
	case "store_wait":
		if len(r.Keys) == 0 {
			return liveStoreReply{}, fmt.Errorf("%s: keys missing", op)
		}
		return s.wait(ctx, op, gen, r.Keys, r.TimeoutMs)
	case "store_check":
		if len(r.Keys) == 0 {
			return liveStoreReply{}, fmt.Errorf("%s: keys missing", op)
		}
		ok, err := s.exist(ctx, h, r.Keys)
		return liveStoreReply{Exists: ok}, wrapStore(op, err)
	case "store_num_keys":
		n, err := s.rdb.HLen(ctx, h).Result()
		return liveStoreReply{Num: n}, wrapStore(op, err)
	case "store_delete":
		if err := needKey(); err != nil {
			return liveStoreReply{}, err
		}
		n, err := s.rdb.HDel(ctx, h, r.Key).Result()
		return liveStoreReply{Exists: n > 0}, wrapStore(op, err)
	}
	return liveStoreReply{}, fmt.Errorf("unknown op %q", op)
}

// wait polls until every key exists, the timeout passed (timeout_ms;
// 0: the worker's live timeout; never more than the restart mode's group
// timeout), gen was replaced or
// the program ended.
func (s *liveStore) wait(ctx context.Context, op string, gen int64, keys []string, timeoutMs int64) (liveStoreReply, error) {
	if timeoutMs < 0 {
		return liveStoreReply{}, fmt.Errorf("%s: timeout_ms %d: want >= 0", op, timeoutMs)
	}
	d := s.def
	if timeoutMs > 0 {
		d = min(s.max, time.Duration(timeoutMs)*time.Millisecond)
	}
	h := s.key(gen)
	deadline := time.Now().Add(d)
	for {
		ok, err := s.exist(ctx, h, keys)
		if err != nil {
			return liveStoreReply{}, wrapStore(op, err)
		}
		if ok {
			return liveStoreReply{}, nil
		}
		if time.Now().After(deadline) {
			return liveStoreReply{}, fmt.Errorf("%s: generation %d: keys %q not set within %s: Timeout", op, gen, keys, d)
		}
		if s.gone != nil {
			sup, err := s.gone(gen)
			if sup {
				return liveStoreReply{Superseded: true}, fmt.Errorf("%s: generation %d: %w", op, gen, errLiveStoreSuperseded)
			}
			if err != nil {
				return liveStoreReply{}, fmt.Errorf("%s: %w", op, err)
			}
		}
		select {
		case <-ctx.Done():
			return liveStoreReply{}, ctx.Err()
		case <-time.After(liveStorePoll):
		}
	}
}

func (s *liveStore) exist(ctx context.Context, h string, keys []string) (bool, error) {
	vs, err := s.rdb.HMGet(ctx, h, keys...).Result()
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		if v == nil {
			return false, nil
		}
	}
	return true, nil
}

func wrapStore(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.Nil):
		return fmt.Errorf("%s: key missing", op)
	}
	return fmt.Errorf("%s: redis: %w", op, err)
}

// liveStoreOp answers a store request of the program (ok false: req is
// not one).
func (w *Worker) liveStoreOp(ctx context.Context, req liveRequest) (liveReply, bool) {
	if !isLiveStoreOp(req.Op) {
		return liveReply{}, false
	}
	s := &liveStore{rdb: w.Deps.Redis, base: w.Co.Keys().Base(),
		def: w.Ecfg.LiveTimeout, max: max(w.Ecfg.LiveTimeout, liveRestartTimeout),
		gone: func(gen int64) (bool, error) {
			if w.programExited() {
				return false, errors.New("the program ended")
			}
			return w.Watch.Latest() > gen, nil
		}}
	rep, err := s.do(ctx, req.Op, req.Gen, req.liveStoreRequest)
	if err != nil {
		return liveReply{Error: err.Error(), liveStoreReply: rep}, true
	}
	return liveReply{liveStoreReply: rep}, true
}
