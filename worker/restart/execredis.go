package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// Exec mode's Redis keys, beside the job's coordination keys (same hash
// tag):
//
//	exec:gen:<G>       hash worker -> execEntry: G's start barrier
//	exec:root          rootRecord: rank 0 of the newest program generation
//	exec:failed:<G>    execFailure: the first program of G that failed on its own
//	exec:counted:<G>   flag: G's failure was counted
//	exec:restarts      failure restarts so far (TORCHELASTIC_RESTART_COUNT)
type execKeys struct{ base string }

func newExecKeys(k coord.Keys) execKeys { return execKeys{base: k.Base() + "exec:"} }

func (k execKeys) Gen(g int64) string     { return k.base + "gen:" + strconv.FormatInt(g, 10) }
func (k execKeys) Root() string           { return k.base + "root" }
func (k execKeys) Failed(g int64) string  { return k.base + "failed:" + strconv.FormatInt(g, 10) }
func (k execKeys) Counted(g int64) string { return k.base + "counted:" + strconv.FormatInt(g, 10) }
func (k execKeys) Restarts() string       { return k.base + "restarts" }

// execEntry is a member's word that its old program is gone and it is set
// to start generation G; rank 0's carries the rendezvous port.
type execEntry struct {
	Port int   `json:"port,omitempty"`
	Seq  int64 `json:"seq"` // newest checkpoint its folder holds
}

// rootRecord is the rank 0 of the newest program generation: its folder
// is the one synced to the store; Synced once it did so after its
// program stopped.
type rootRecord struct {
	Gen    int64  `json:"gen"`
	Worker string `json:"worker"`
	Synced bool   `json:"synced"`
	Seq    int64  `json:"seq"`
}

// execFailure is the first program failure of a generation, for the job's
// reason if the restart budget runs out.
type execFailure struct {
	Worker string `json:"worker"`
	Rank   int    `json:"rank"`
	Exit   string `json:"exit"` // "exit code 3", "killed by SIGKILL"
	Code   int    `json:"code"`
	Tail   string `json:"stderr_tail"`
	// Error is the root cause the program wrote to TORCHELASTIC_ERROR_FILE.
	Error string `json:"error,omitempty"`
}

// readPeers takes one look (one round trip) at what judgePeers needs.
func readPeers(ctx context.Context, rdb redis.UniversalClient, k coord.Keys, g *coord.Generation) (peerView, error) {
	var gen *redis.StringCmd
	var done *redis.IntCmd
	var reports, members *redis.MapStringStringCmd
	hb := make([]*redis.IntCmd, len(g.Members))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		gen = p.Get(ctx, k.GenNum())
		done = p.Exists(ctx, k.Done())
		reports = p.HGetAll(ctx, k.Reports())
		members = p.HGetAll(ctx, k.Members())
		for i, id := range g.Members {
			hb[i] = p.Exists(ctx, k.Heartbeat(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return peerView{}, fmt.Errorf("read members: %w", err)
	}
	v := peerView{Done: done.Val() > 0, Reported: map[string]int64{}, State: map[string]coord.MemberState{}, Alive: map[string]bool{}}
	v.Latest, _ = strconv.ParseInt(gen.Val(), 10, 64)
	for w, r := range reports.Val() {
		gs, _, _ := strings.Cut(r, "|")
		if n, err := strconv.ParseInt(gs, 10, 64); err == nil {
			v.Reported[w] = n
		}
	}
	for w, raw := range members.Val() {
		var m coord.Member
		if json.Unmarshal([]byte(raw), &m) == nil {
			v.State[w] = m.State
		}
	}
	for i, id := range g.Members {
		v.Alive[id] = hb[i].Val() > 0
	}
	return v, nil
}

// readBarrier takes one look at g's start barrier.
func readBarrier(ctx context.Context, rdb redis.UniversalClient, k coord.Keys, ek execKeys, g *coord.Generation) (barrierView, error) {
	var gen, root *redis.StringCmd
	var done *redis.IntCmd
	var entries *redis.MapStringStringCmd
	hb := make([]*redis.IntCmd, len(g.Members))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		gen = p.Get(ctx, k.GenNum())
		done = p.Exists(ctx, k.Done())
		entries = p.HGetAll(ctx, ek.Gen(g.Number))
		root = p.Get(ctx, ek.Root())
		for i, id := range g.Members {
			hb[i] = p.Exists(ctx, k.Heartbeat(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return barrierView{}, fmt.Errorf("read start barrier of generation %d: %w", g.Number, err)
	}
	v := barrierView{Done: done.Val() > 0, Entries: map[string]execEntry{}, Alive: map[string]bool{}}
	v.Latest, _ = strconv.ParseInt(gen.Val(), 10, 64)
	for w, raw := range entries.Val() {
		var e execEntry
		if json.Unmarshal([]byte(raw), &e) == nil {
			v.Entries[w] = e
		}
	}
	for i, id := range g.Members {
		v.Alive[id] = hb[i].Val() > 0
	}
	if b, err := root.Bytes(); err == nil {
		var r rootRecord
		if json.Unmarshal(b, &r) == nil {
			v.Root = &r
			if _, known := v.Alive[r.Worker]; !known {
				n, err := rdb.Exists(ctx, k.Heartbeat(r.Worker)).Result()
				if err != nil {
					return barrierView{}, fmt.Errorf("read heartbeat of %s: %w", r.Worker, err)
				}
				v.Alive[r.Worker] = n > 0
			}
		}
	}
	return v, nil
}
