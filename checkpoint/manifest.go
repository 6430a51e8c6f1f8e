package checkpoint

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion = 1

// Shard names the worker uses; the package treats every shard alike.
const (
	ShardParams    = "params"    // model: edl writes the trainer state format (worker/trainer doc.go)
	ShardOptimizer = "optimizer" // optimizer state (momentum, little-endian float32)
	ShardData      = "data"      // data-pipeline position
	ShardTrainer   = "trainer"   // trainer metadata
)

// Meta is what the caller says about a checkpoint.
type Meta struct {
	Step       int64 `json:"step"`
	Epoch      int   `json:"epoch"`
	Generation int64 `json:"generation"`
	WorldSize  int   `json:"world_size"`
	// Labels are free-form facts for the caller (loss, samples, ...).
	Labels map[string]string `json:"labels,omitempty"`
}

// Manifest is the commit record of one checkpoint.
type Manifest struct {
	FormatVersion int         `json:"format_version"`
	Job           string      `json:"job"`
	Meta                      // step, epoch, generation, world size, labels
	CreatedAt     time.Time   `json:"created_at"`
	Shards        []ShardInfo `json:"shards"`
}

// ShardInfo is one shard as the manifest records it.
type ShardInfo struct {
	Name   string `json:"name"`
	Key    string `json:"key"` // object key in the store
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

// Size is the total of the shards' sizes.
func (m *Manifest) Size() int64 {
	var n int64
	for _, s := range m.Shards {
		n += s.Size
	}
	return n
}

// Shard returns the named shard's record.
func (m *Manifest) Shard(name string) (ShardInfo, bool) {
	for _, s := range m.Shards {
		if s.Name == name {
			return s, true
		}
	}
	return ShardInfo{}, false
}

var (
	segmentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	hexRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// checkName accepts job ids and shard names that are safe as one key segment.
func checkName(what, s string) error {
	if !segmentRE.MatchString(s) || strings.HasPrefix(s, tempPrefix) {
		return fmt.Errorf("invalid %s %q: want letters, digits, '.', '_' or '-', at most 128", what, s)
	}
	return nil
}

func manifestPrefix(job string) string { return job + "/manifests/" }
func shardPrefix(job string) string    { return job + "/shards/" }

func manifestKey(job string, step int64) string {
	return fmt.Sprintf("%s%020d.json", manifestPrefix(job), step)
}

// stepOfManifestKey parses the step from a manifest key, false for any other.
func stepOfManifestKey(job, key string) (int64, bool) {
	name, ok := strings.CutPrefix(key, manifestPrefix(job))
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	step, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || step < 0 {
		return 0, false
	}
	return step, true
}

// shardDir is where one write attempt's shards go. The nonce keeps a retry,
// or a second writer at the same step, from overwriting shards a committed
// manifest points at.
func shardDir(job string, step int64, nonce string) string {
	return fmt.Sprintf("%s%020d-%s/", shardPrefix(job), step, nonce)
}

// decodeManifest parses and checks a manifest read from key.
func decodeManifest(job string, step int64, data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	switch {
	case m.FormatVersion != FormatVersion:
		return nil, fmt.Errorf("manifest: format version %d, this build reads %d", m.FormatVersion, FormatVersion)
	case m.Job != job:
		return nil, fmt.Errorf("manifest: job %q, want %q", m.Job, job)
	case m.Step != step:
		return nil, fmt.Errorf("manifest: step %d under the key of step %d", m.Step, step)
	case len(m.Shards) == 0:
		return nil, fmt.Errorf("manifest: no shards")
	}
	seen := map[string]bool{}
	for _, s := range m.Shards {
		if err := checkName("shard name", s.Name); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("manifest: shard %q twice", s.Name)
		}
		seen[s.Name] = true
		if !strings.HasPrefix(s.Key, shardPrefix(job)) || checkKey(s.Key) != nil {
			return nil, fmt.Errorf("manifest: shard %q has key %q outside the job", s.Name, s.Key)
		}
		if s.Size < 0 || !hexRE.MatchString(s.SHA256) {
			return nil, fmt.Errorf("manifest: shard %q has size %d and sha256 %q", s.Name, s.Size, s.SHA256)
		}
	}
	return &m, nil
}
