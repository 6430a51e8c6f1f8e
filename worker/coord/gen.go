package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/worker/internal/rhash"
	"github.com/redis/go-redis/v9"
)

// Generation is one fixed, ordered set of workers training together over
// one ring. The leader writes it; members switch to it at a step boundary.
type Generation struct {
	Number  int64    `json:"number"`
	Members []string `json:"members"` // worker ids by rank
	Addrs   []string `json:"addrs"`   // ring addresses by rank
	// Root is the rank whose state (parameters, optimizer, step, data
	// cursor) every member takes at the switch; -1 means a fresh start
	// from the model's seed.
	Root int `json:"root"`
	// Sync is set when the generation follows a failure: members may hold
	// different states and the root's wins; LastApplied is its step.
	Sync        bool  `json:"sync"`
	LastApplied int64 `json:"last_applied"`
	// Joiners are the members new to this generation when it admits
	// workers without a failure: the root hands them its state directly,
	// while the others keep theirs.
	Joiners []string `json:"joiners,omitempty"`
	// Restore is set when no live worker holds the training state (every
	// member of the last generation died or left): the root (rank 0) loads
	// the newest good checkpoint, or starts from the seed when there is
	// none, resets the data pipeline to match, and hands the state out.
	Restore  bool      `json:"restore,omitempty"`
	Reason   string    `json:"reason"`
	FormedAt time.Time `json:"formed_at"`
}

// Rank returns worker's rank in g, or -1.
func (g *Generation) Rank(worker string) int {
	if g == nil {
		return -1
	}
	return slices.Index(g.Members, worker)
}

// ReadGen reads the current generation; nil when none was formed yet.
func (c *Client) ReadGen(ctx context.Context) (*Generation, error) {
	raw, err := c.rdb.Get(ctx, c.keys.Gen()).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read generation: %w", err)
	}
	var g Generation
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("decode generation: %w", err)
	}
	return &g, nil
}

// Report is a member's account after its ring broke.
type Report struct {
	Worker  string
	Gen     int64 // the generation whose ring broke
	Applied int64 // last step it applied (-1: none)
}

// ErrStaleReport: the generation a failure report is about is no longer
// the current one (a newer one was formed meanwhile); the report is dropped.
var ErrStaleReport = errors.New("failure report for a generation that is no longer current")

// reportScript files a failure report only while its generation is the
// current one (KEYS[1], the generation number), in the same step as the
// check: setGenScript clears the reports when it writes the next
// generation, and a report of the old one that landed after that would
// make the next decision drop members that are fine.
var reportScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur ~= tonumber(ARGV[2]) then return cur end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. '|' .. ARGV[3])
redis.call('PUBLISH', KEYS[3], 'report:' .. ARGV[1])
return -1`)

// Report records that this worker's ring of generation gen broke after it
// applied step applied, and wakes the leader. It fails with ErrStaleReport,
// writing nothing, when gen is no longer the current generation.
func (c *Client) Report(ctx context.Context, gen, applied int64) error {
	cur, err := reportScript.Run(ctx, c.rdb, []string{c.keys.GenNum(), c.keys.Reports(), c.keys.Channel()},
		c.cfg.Worker, gen, applied).Int64()
	if err != nil {
		return fmt.Errorf("report broken ring of generation %d: %w", gen, err)
	}
	if cur >= 0 {
		return fmt.Errorf("report broken ring of generation %d: current is %d: %w", gen, cur, ErrStaleReport)
	}
	return nil
}

// Reports reads the failure reports filed since the last generation. A
// report names its generation; Decide counts only the current one's.
func (c *Client) Reports(ctx context.Context) (map[string]Report, error) {
	return rhash.Read(ctx, c.rdb, c.keys.Reports(), "reports", func(w, v string) (string, Report, bool) {
		g, a, ok := strings.Cut(v, "|")
		gn, err1 := strconv.ParseInt(g, 10, 64)
		an, err2 := strconv.ParseInt(a, 10, 64)
		return w, Report{Worker: w, Gen: gn, Applied: an}, ok && err1 == nil && err2 == nil
	})
}
