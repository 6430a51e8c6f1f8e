package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// RedisMembership reads a job's generation from the workers' coordination
// keys (<prefix>{job}:gen and :members) for those outside the job: the API's
// workers list (api.Membership).
type RedisMembership struct {
	Redis  redis.UniversalClient
	Prefix string // the workers' key prefix, default "edl:"
}

// Generation is the job's current generation; Number 0 when none formed.
func (m RedisMembership) Generation(ctx context.Context, jobID string) (jobs.MemberGeneration, error) {
	prefix := m.Prefix
	if prefix == "" {
		prefix = "edl:"
	}
	k := NewKeys(prefix, jobID)
	var out jobs.MemberGeneration
	raw, err := m.Redis.Get(ctx, k.Gen()).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return out, fmt.Errorf("generation of %s: %w", jobID, err)
	default:
		var g Generation
		if err := json.Unmarshal(raw, &g); err != nil {
			return out, fmt.Errorf("generation of %s: decode: %w", jobID, err)
		}
		out.Number, out.Members = g.Number, g.Members
	}
	recs, err := m.Redis.HGetAll(ctx, k.Members()).Result()
	if err != nil {
		return out, fmt.Errorf("members of %s: %w", jobID, err)
	}
	out.States = make(map[string]string, len(recs))
	for id, v := range recs {
		var mem Member
		if json.Unmarshal([]byte(v), &mem) == nil {
			out.States[id] = string(mem.State)
		}
	}
	return out, nil
}
