package loop

import (
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// TenantShares turns the tenants file into the policy's view of it, for
// Config.Tenants: every tenant but the admins, read afresh each round.
func TenantShares(t *jobs.Tenants) func() []planner.TenantShare {
	return func() []planner.TenantShare {
		var out []planner.TenantShare
		for _, tn := range t.All() {
			if tn.Admin {
				continue
			}
			out = append(out, planner.TenantShare{Name: tn.Name, QuotaGPUs: tn.GPUQuota, Weight: tn.Weight})
		}
		return out
	}
}
