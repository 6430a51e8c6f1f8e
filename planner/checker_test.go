package planner

import (
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

// The property checker must be able to fail: break a good plan in each way
// it guards against and see it complain.
func TestCheckPlanCatchesViolations(t *testing.T) {
	base := func() (Snapshot, Plan) {
		s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
			Tenants: []TenantShare{{Name: "q", QuotaGPUs: 2}},
			Jobs:    []JobState{job("a", 2, 4), job("b", 2, 4), job("c", 1, 4, tenantOf("q"))}}
		p := Decide(s, t0)
		if err := checkPlan(s, p); err != nil {
			t.Fatalf("good plan rejected: %v", err)
		}
		return s, p
	}
	breaks := map[string]func(s *Snapshot, p *Plan){
		"over-committed node": func(s *Snapshot, p *Plan) {
			p.Targets[0].Workers++
			p.Targets[0].Placement["n-0"]++
		},
		"below minimum": func(s *Snapshot, p *Plan) {
			p.Targets[0].Workers = 1
			p.Targets[0].Placement = map[string]int{"n-0": 1}
		},
		"quota exceeded": func(s *Snapshot, p *Plan) {
			s.Tenants[0].QuotaGPUs = 1
		},
		"idle GPU": func(s *Snapshot, p *Plan) {
			p.Targets[1].Workers--
			p.Targets[1].Placement["n-0"]--
		},
		"wrong class": func(s *Snapshot, p *Plan) {
			s.Jobs[0].GPU = &jobs.GPUConstraint{Model: "A100"}
		},
		"missing suspend": func(s *Snapshot, p *Plan) {
			s.Jobs[2].Current = 1
			p.Targets[2] = Target{JobID: "c", Reason: "x"}
		},
	}
	for name, br := range breaks {
		t.Run(name, func(t *testing.T) {
			s, p := base()
			br(&s, &p)
			if err := checkPlan(s, p); err == nil {
				t.Errorf("checkPlan accepted a plan with %s: %+v", name, p)
			}
		})
	}
}
