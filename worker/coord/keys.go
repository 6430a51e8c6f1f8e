package coord

import "strconv"

// Keys names every Redis key of one job. All share the hash tag {<job>}.
type Keys struct {
	base string
}

// NewKeys returns the key names for job under prefix (e.g. "edl:").
func NewKeys(prefix, job string) Keys {
	return Keys{base: prefix + "{" + job + "}:"}
}

// Base is the common prefix of the job's keys, "edl:{job}:".
func (k Keys) Base() string { return k.base }

// Heartbeat is the PX-leased key that says worker is alive.
func (k Keys) Heartbeat(worker string) string { return k.base + "hb:" + worker }

// Members is the hash worker -> JSON Member.
func (k Keys) Members() string { return k.base + "members" }

// Leader holds the leader's worker id with a PX lease.
func (k Keys) Leader() string { return k.base + "leader" }

// Fence is INCRed at every leadership takeover.
func (k Keys) Fence() string { return k.base + "fence" }

// Gen holds the current generation as JSON.
func (k Keys) Gen() string { return k.base + "gen" }

// GenNum holds the current generation's number alone, for cheap checks in
// the data pipeline's scripts.
func (k Keys) GenNum() string { return k.base + "gennum" }

// CommitFence is "G|L": commits from generations before G may not record a
// step after L (the last step applied by the survivors of a failure).
func (k Keys) CommitFence() string { return k.base + "commitfence" }

// Reports is the hash worker -> "gen|applied" of members whose ring broke
// since the last generation was formed; forming one clears it.
func (k Keys) Reports() string { return k.base + "reports" }

// Channel is the pub/sub channel for events (ready, left, report, gen, leader).
func (k Keys) Channel() string { return k.base + "events" }

// Done is set once the job's training finished; late workers exit.
func (k Keys) Done() string { return k.base + "done" }

// Todo is the list of partitions of epoch e not yet claimed.
func (k Keys) Todo(epoch int) string { return k.base + "epoch:" + strconv.Itoa(epoch) + ":todo" }

// Parts is the hash partition -> record of epoch e (owner, committed offset).
func (k Keys) Parts(epoch int) string { return k.base + "epoch:" + strconv.Itoa(epoch) + ":parts" }

// EpochInit is set once epoch e's queue was created.
func (k Keys) EpochInit(epoch int) string { return k.base + "epoch:" + strconv.Itoa(epoch) + ":init" }

// Debug is the hash step -> samples consumed by that applied step (debug mode).
func (k Keys) Debug() string { return k.base + "debug" }

// Speed is the hash worker -> EWMA of its per-step compute time in
// milliseconds (a decimal string); the planner reads it to spot stragglers.
// Workers refresh its TTL as they write.
func (k Keys) Speed() string { return k.base + "speed" }

// Stop, when set, asks every worker to stop training at the next step
// boundary (a cancel that does not go through the job store).
func (k Keys) Stop() string { return k.base + "stop" }
