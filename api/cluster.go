package api

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// TenantStatus is a tenant's quota and what it holds now.
type TenantStatus struct {
	Name     string  `json:"name"`
	Admin    bool    `json:"admin"`
	GPUQuota int     `json:"gpu_quota"`
	Weight   float64 `json:"weight"`
	RatePerS float64 `json:"rate_per_s"`
	Burst    int     `json:"burst"`
	// MaxWorkers and MaxParameters bound each job: the tenant's limits, or
	// the global bounds where the tenants file sets none.
	MaxWorkers    int        `json:"max_workers" example:"1024"`
	MaxParameters int64      `json:"max_parameters" example:"67108864"`
	Usage         jobs.Usage `json:"usage"`
}

// Holding is what one live job holds.
type Holding struct {
	Job     string           `json:"job"`
	Tenant  string           `json:"tenant"`
	State   jobs.State       `json:"state"`
	Workers jobs.WorkerCount `json:"workers"`
	GPUs    int              `json:"gpus"`
	// Reason is why a pending or suspended job waits (the planner's words).
	Reason string `json:"reason,omitempty"`
	// Placement is the job's live workers per node, when the cluster tells.
	Placement map[string]int `json:"placement,omitempty"`
}

// ClusterStatus is the admin view: capacity and who holds what.
type ClusterStatus struct {
	// Capacity is absent when no cluster is attached or it did not answer.
	Capacity      *jobs.Capacity `json:"capacity,omitempty"`
	CapacityError string         `json:"capacity_error,omitempty"`
	Tenants       []TenantStatus `json:"tenants"`
	Jobs          []Holding      `json:"jobs"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string `json:"status" example:"ok"`
}

// clusterStatus godoc
//
//	@Summary	Cluster capacity and who holds what (admin)
//	@Tags		operations
//	@Security	BearerAuth
//	@Produce	json
//	@Success	200	{object}	ClusterStatus
//	@Failure	401	{object}	Problem
//	@Failure	403	{object}	Problem	"not an admin"
//	@Router		/v1/cluster [get]
func (s *Server) clusterStatus(c echo.Context) error {
	if !tenantOf(c).Admin {
		return newProblem(http.StatusForbidden, ProblemForbidden, "admins only", "")
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	active, err := s.store.ListActive(ctx)
	if err != nil {
		return err
	}
	out := ClusterStatus{Jobs: []Holding{}}
	if s.cluster != nil {
		capa, err := s.cluster.Capacity(ctx)
		if err != nil {
			out.CapacityError = err.Error()
		} else {
			out.Capacity = &capa
		}
	}
	usage := jobs.UsageOf(active)
	for _, tn := range s.tenants.All() {
		out.Tenants = append(out.Tenants, tenantStatus(tn, usage[tn.Name]))
	}
	for _, j := range active {
		out.Jobs = append(out.Jobs, Holding{Job: j.ID, Tenant: j.Tenant, State: j.State, Workers: j.Workers,
			GPUs: j.Workers.Current * j.Spec.GPUsPerWorker, Reason: j.Reason})
	}
	s.fillPlacement(ctx, out.Jobs)
	sort.SliceStable(out.Jobs, func(a, b int) bool { return out.Jobs[a].Tenant < out.Jobs[b].Tenant })
	return writeJSON(c, http.StatusOK, out)
}

func tenantStatus(tn jobs.Tenant, u jobs.Usage) TenantStatus {
	if u.Jobs == nil {
		u.Jobs = map[jobs.State]int{}
	}
	st := TenantStatus{Name: tn.Name, Admin: tn.Admin, GPUQuota: tn.GPUQuota, Weight: tn.Weight,
		RatePerS: tn.RatePerS, Burst: tn.Burst, MaxWorkers: tn.MaxWorkers, MaxParameters: tn.MaxParameters, Usage: u}
	if st.MaxWorkers == 0 {
		st.MaxWorkers = jobs.MaxWorkers
	}
	if st.MaxParameters == 0 {
		st.MaxParameters = jobs.MaxParameters
	}
	return st
}

// tenantMe godoc
//
//	@Summary	The caller's tenant: quota, weight, rate limit and usage
//	@Tags		tenants
//	@Security	BearerAuth
//	@Produce	json
//	@Success	200	{object}	TenantStatus
//	@Failure	401	{object}	Problem
//	@Router		/v1/tenants/me [get]
func (s *Server) tenantMe(c echo.Context) error {
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	active, err := s.store.ListActive(ctx)
	if err != nil {
		return err
	}
	tn := tenantOf(c)
	return writeJSON(c, http.StatusOK, tenantStatus(tn, jobs.UsageOf(active)[tn.Name]))
}

// healthz godoc
//
//	@Summary	The process is up
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	Health
//	@Router		/healthz [get]
func (s *Server) healthz(c echo.Context) error {
	return writeJSON(c, http.StatusOK, Health{Status: "ok"})
}

// readyz godoc
//
//	@Summary	Redis is reachable
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	Health
//	@Failure	503	{object}	Problem
//	@Router		/readyz [get]
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return &problemError{p: Problem{Type: ProblemUnavailable, Title: "redis is not reachable", Status: http.StatusServiceUnavailable, Detail: err.Error()}, err: err}
	}
	return writeJSON(c, http.StatusOK, Health{Status: "ok"})
}
