package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/worker/internal/rhash"
	"github.com/redis/go-redis/v9"
)

// MemberState is where a worker is in its life:
//
//	preparing --model, data, listener built--> ready
//	ready --named in a generation and synced--> active
//	active --excluded from a newer generation--> ready
//	active --SIGTERM or marked leaving--> leaving --last step committed--> (record deleted)
//
// A worker that dies simply stops renewing its heartbeat.
type MemberState string

const (
	Preparing MemberState = "preparing"
	Ready     MemberState = "ready"
	Active    MemberState = "active"
	Leaving   MemberState = "leaving"
)

// Member is one worker's record in the members hash.
type Member struct {
	ID    string      `json:"id"`
	Addr  string      `json:"addr"` // ring listener, host:port
	State MemberState `json:"state"`
	Since time.Time   `json:"since"` // when it registered; orders newcomers
}

// Config is what a coordination client needs.
type Config struct {
	Prefix    string        // key prefix, default "edl:"
	Job       string        // job id
	Worker    string        // this worker's id
	Lease     time.Duration // heartbeat and leader lease
	Heartbeat time.Duration // renewal interval, well inside Lease
}

// Validate names the field at fault.
func (c Config) Validate() error {
	switch {
	case c.Job == "":
		return errors.New("coord config: job: empty")
	case c.Worker == "" || strings.ContainsAny(c.Worker, "|,; "):
		return fmt.Errorf("coord config: worker: %q must be non-empty without '|,; '", c.Worker)
	case c.Lease <= 0:
		return errors.New("coord config: lease: must be positive")
	case c.Heartbeat <= 0 || c.Heartbeat*2 > c.Lease:
		return errors.New("coord config: heartbeat: must be positive and at most half the lease")
	}
	return nil
}

// Client is one worker's handle on its job's coordination state.
type Client struct {
	rdb  redis.UniversalClient
	cfg  Config
	keys Keys
	log  *slog.Logger
}

// New returns a client; it does no I/O.
func New(rdb redis.UniversalClient, cfg Config, log *slog.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{rdb: rdb, cfg: cfg, keys: NewKeys(cfg.Prefix, cfg.Job), log: log.With("component", "coord")}, nil
}

// Keys returns the job's key names.
func (c *Client) Keys() Keys { return c.keys }

// SetMember writes this worker's record and renews its heartbeat.
func (c *Client) SetMember(ctx context.Context, m Member) error {
	m.ID = c.cfg.Worker
	b, _ := json.Marshal(m)
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, c.keys.Members(), m.ID, b)
		p.Set(ctx, c.keys.Heartbeat(m.ID), string(m.State), c.cfg.Lease)
		p.Publish(ctx, c.keys.Channel(), "member:"+m.ID+":"+string(m.State))
		return nil
	})
	if err != nil {
		return fmt.Errorf("set member %s: %w", m.ID, err)
	}
	return nil
}

// Heartbeat renews this worker's lease once.
func (c *Client) Heartbeat(ctx context.Context) error {
	if err := c.rdb.Set(ctx, c.keys.Heartbeat(c.cfg.Worker), "1", c.cfg.Lease).Err(); err != nil {
		return fmt.Errorf("heartbeat %s: %w", c.cfg.Worker, err)
	}
	return nil
}

// RunHeartbeat renews the lease every Heartbeat until ctx ends. Errors are
// logged and retried: Redis may be briefly away.
func (c *Client) RunHeartbeat(ctx context.Context) error {
	_ = periodic.Every(ctx, c.cfg.Heartbeat, func() bool {
		if err := c.Heartbeat(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("heartbeat failed", "err", err)
		}
		return true
	})
	return nil
}

// Leave deletes this worker's record and heartbeat and tells the leader.
func (c *Client) Leave(ctx context.Context) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, c.keys.Members(), c.cfg.Worker)
		p.Del(ctx, c.keys.Heartbeat(c.cfg.Worker))
		p.Publish(ctx, c.keys.Channel(), "left:"+c.cfg.Worker)
		return nil
	})
	if err != nil {
		return fmt.Errorf("leave %s: %w", c.cfg.Worker, err)
	}
	return nil
}

// Members reads every member record.
func (c *Client) Members(ctx context.Context) (map[string]Member, error) {
	return rhash.Read(ctx, c.rdb, c.keys.Members(), "members", func(id, v string) (string, Member, bool) {
		var m Member
		err := json.Unmarshal([]byte(v), &m)
		m.ID = id
		return id, m, err == nil
	})
}

// Alive reports which of ids have a live heartbeat. It leaves ids as they
// are (a generation's members are in rank order).
func (c *Client) Alive(ctx context.Context, ids []string) (map[string]bool, error) {
	ids = slices.Sorted(slices.Values(ids))
	cmds := make([]*redis.IntCmd, len(ids))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Exists(ctx, c.keys.Heartbeat(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read heartbeats: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for i, id := range ids {
		out[id] = cmds[i].Val() > 0
	}
	return out, nil
}

// Done reports whether the job's training has finished.
func (c *Client) Done(ctx context.Context) (bool, error) {
	n, err := c.rdb.Exists(ctx, c.keys.Done()).Result()
	if err != nil {
		return false, fmt.Errorf("read done: %w", err)
	}
	return n > 0, nil
}

// MarkDone records that training finished and wakes every waiting worker.
func (c *Client) MarkDone(ctx context.Context, reason string) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, c.keys.Done(), reason, 0)
		p.Publish(ctx, c.keys.Channel(), "done")
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark done: %w", err)
	}
	return nil
}

// Lapsed returns the first member of g other than self whose heartbeat
// has lapsed (it died, froze or lost Redis), or "". A generation with such
// a member can never complete its ring: its other members stop waiting for
// it and report the generation broken instead of running into their ring
// or join timeouts.
func (c *Client) Lapsed(ctx context.Context, g *Generation, self string) (string, error) {
	alive, err := c.Alive(ctx, g.Members)
	if err != nil {
		return "", err
	}
	for _, id := range g.Members {
		if id != self && !alive[id] {
			return id, nil
		}
	}
	return "", nil
}
