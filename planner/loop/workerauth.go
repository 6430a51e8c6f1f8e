package loop

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// WorkerAuth gives each job's workers a Redis login of their own; the
// loop makes it before it starts a job's workers and removes it once the
// job is torn down. Both are idempotent.
type WorkerAuth interface {
	Ensure(ctx context.Context, jobID string) error
	Remove(ctx context.Context, jobID string) error
}

// WorkerACL is WorkerAuth with Redis ACL users: the user of job J may run
// data commands on the keys and pub/sub channels of J (<prefix>{J}:*) and
// nothing else: no other job's keys, no SCAN, KEYS, PUBSUB, CLIENT LIST,
// MONITOR, CONFIG or ACL. Its password is derived from a random secret
// kept in Redis under <prefix>acl:secret (a key no worker may read), so a
// planner that takes over makes the same users, and the cluster adapter
// (Credentials) gives the same password to the workers it starts.
type WorkerACL struct {
	rdb    redis.UniversalClient
	prefix string
	secret []byte
}

// ErrNoACL means the Redis the planner uses cannot give workers users of
// their own: it has no ACL (before Redis 6) or the planner's user may not
// manage users.
var ErrNoACL = errors.New("redis: no per-job ACL users")

// NewWorkerACL loads (or makes, the first time) the secret and checks that
// this Redis user may create and delete ACL users.
func NewWorkerACL(ctx context.Context, rdb redis.UniversalClient, prefix string) (*WorkerACL, error) {
	if prefix == "" {
		prefix = "edl:"
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	key := prefix + "acl:secret"
	if err := rdb.SetNX(ctx, key, hex.EncodeToString(b), 0).Err(); err != nil {
		return nil, fmt.Errorf("worker ACL secret: %w", err)
	}
	secret, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("worker ACL secret: %w", err)
	}
	a := &WorkerACL{rdb: rdb, prefix: prefix, secret: []byte(secret)}
	probe := "edl-probe-" + hex.EncodeToString(b[:4])
	args := []any{"ACL", "SETUSER", probe, "reset", "off"}
	for _, r := range workerRules {
		args = append(args, r)
	}
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		return nil, fmt.Errorf("%w: ACL SETUSER: %v (Redis 6 or newer, and a user allowed +acl|setuser +acl|deluser, are needed)", ErrNoACL, err)
	}
	if err := rdb.Do(ctx, "ACL", "DELUSER", probe).Err(); err != nil {
		return nil, fmt.Errorf("%w: ACL DELUSER: %v", ErrNoACL, err)
	}
	return a, nil
}

// User is the ACL user of a job's workers.
func (a *WorkerACL) User(jobID string) string { return "edl-job-" + jobID }

// Credentials are the user and password a job's workers log in with.
func (a *WorkerACL) Credentials(jobID string) (user, password string) {
	m := hmac.New(sha256.New, a.secret)
	m.Write([]byte(a.prefix + jobID))
	return a.User(jobID), hex.EncodeToString(m.Sum(nil))
}

// workerRules is what a job's workers may run, beside their key and
// channel patterns: data commands, scripts, pub/sub and transactions;
// not what lists or reaches beyond their keys. TIME, for the job store's
// progress script (a point a second): without it every progress point
// after a job's first was refused, and its history held one point.
var workerRules = []string{
	"-@all", "+@read", "+@write", "+@pubsub", "+@transaction", "+@connection",
	"+eval", "+evalsha", "+eval_ro", "+evalsha_ro", "+script|load", "+script|exists", "+time",
	"-@dangerous", "-@admin",
	"-scan", "-keys", "-randomkey", "-dbsize", "-pubsub", "-swapdb", "-move", "-migrate",
	"-client", "+client|setname", "+client|getname", "+client|id", // CLIENT SETINFO (7.2) refused: go-redis ignores that
}

// Ensure creates (or re-creates, unchanged) the job's user.
func (a *WorkerACL) Ensure(ctx context.Context, jobID string) error {
	user, pass := a.Credentials(jobID)
	pat := globEscape(a.prefix+"{"+jobID+"}:") + "*"
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + pass, "~" + pat, "&" + pat}
	for _, r := range workerRules {
		args = append(args, r)
	}
	if err := a.rdb.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("worker ACL user of %s: %w", jobID, err)
	}
	return nil
}

// Remove deletes the job's user (connections logged in as it are closed).
func (a *WorkerACL) Remove(ctx context.Context, jobID string) error {
	if err := a.rdb.Do(ctx, "ACL", "DELUSER", a.User(jobID)).Err(); err != nil {
		return fmt.Errorf("delete worker ACL user of %s: %w", jobID, err)
	}
	return nil
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// authEvery is how often the loop makes a live job's user again: Redis
// keeps ACL users in memory only, so a restarted Redis (edl dev's child
// is restarted by its supervisor) has lost them.
const authEvery = 10 * time.Second

// authCluster is the loop's cluster with the job's user made before its
// workers start (and again every authEvery while it has workers) and
// removed when it is torn down.
type authCluster struct {
	Cluster
	auth WorkerAuth
	now  func() time.Time

	mu   sync.Mutex
	made map[string]time.Time // job -> when its user was last made
	gone map[string]time.Time // torn-down job -> since when, user still there
}

func newAuthCluster(c Cluster, auth WorkerAuth, now func() time.Time) *authCluster {
	return &authCluster{Cluster: c, auth: auth, now: now, made: map[string]time.Time{}, gone: map[string]time.Time{}}
}

func (c *authCluster) ensure(ctx context.Context, jobID string, force bool) error {
	c.mu.Lock()
	last, ok := c.made[jobID]
	c.mu.Unlock()
	if !force && ok && c.now().Sub(last) < authEvery {
		return nil
	}
	if err := c.auth.Ensure(ctx, jobID); err != nil {
		return err
	}
	c.mu.Lock()
	c.made[jobID] = c.now()
	c.mu.Unlock()
	return nil
}

func (c *authCluster) Scale(ctx context.Context, job jobs.Job, count int, reason string) error {
	if count > 0 {
		if err := c.ensure(ctx, job.ID, false); err != nil {
			return fmt.Errorf("scale %s: %w", job.ID, err)
		}
	}
	return c.Cluster.Scale(ctx, job, count, reason)
}

func (c *authCluster) Workers(ctx context.Context, jobID string) ([]jobs.Worker, error) {
	ws, err := c.Cluster.Workers(ctx, jobID)
	if err == nil && anyLive(ws) {
		if err := c.ensure(ctx, jobID, false); err != nil {
			return nil, err
		}
	}
	return ws, err
}

// Teardown stops the job's workers; their user is removed once they are
// gone (a cancelled job's workers still write their last checkpoint and
// events), at the latest authLinger after the teardown.
func (c *authCluster) Teardown(ctx context.Context, jobID string) error {
	if err := c.Cluster.Teardown(ctx, jobID); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.made, jobID)
	if _, ok := c.gone[jobID]; !ok {
		c.gone[jobID] = c.now()
	}
	c.mu.Unlock()
	return c.removeGone(ctx)
}

// authLinger bounds how long a torn-down job's user outlives the teardown.
const authLinger = 2 * time.Minute

// Capacity is called every round: the time to remove the users of
// torn-down jobs whose workers are gone.
func (c *authCluster) Capacity(ctx context.Context) (jobs.Capacity, error) {
	if err := c.removeGone(ctx); err != nil {
		return jobs.Capacity{}, err
	}
	return c.Cluster.Capacity(ctx)
}

func (c *authCluster) removeGone(ctx context.Context) error {
	c.mu.Lock()
	var due []string
	for id := range c.gone {
		if _, live := c.made[id]; live { // scaled up again meanwhile
			delete(c.gone, id)
			continue
		}
		due = append(due, id)
	}
	c.mu.Unlock()
	for _, id := range due {
		ws, err := c.Cluster.Workers(ctx, id)
		if err != nil {
			return err
		}
		c.mu.Lock()
		since := c.gone[id]
		c.mu.Unlock()
		if anyLive(ws) && c.now().Sub(since) < authLinger {
			continue
		}
		if err := c.auth.Remove(ctx, id); err != nil {
			return err
		}
		c.mu.Lock()
		delete(c.gone, id)
		c.mu.Unlock()
	}
	return nil
}

// anyLive reports whether a worker of ws still runs, a stopping one
// included (it may still write its last checkpoint and events).
func anyLive(ws []jobs.Worker) bool {
	for _, w := range ws {
		if w.State.Live() {
			return true
		}
	}
	return false
}
