package jobs

// Listing bounds.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// ListQuery selects a tenant's jobs, newest first (jobstore.Store.List).
type ListQuery struct {
	Tenant string
	// States, when set, keeps jobs in any of them.
	States []State
	// Labels, when set, keeps jobs carrying every one of these labels.
	Labels map[string]string
	// Limit is the page size (default 50, at most 500).
	Limit int
	// Cursor is the next value of the previous page ("" = first page).
	Cursor string
}

// Usage is what a tenant holds now.
type Usage struct {
	// GPUs held by the tenant's live workers (workers.current x gpus_per_worker).
	GPUs int `json:"gpus"`
	// Workers is the number of live workers, CPU-only ones included.
	Workers int `json:"workers"`
	// Jobs counts the tenant's non-terminal jobs by state.
	Jobs map[State]int `json:"jobs"`
}

// UsageOf adds up what each tenant's active jobs hold, by tenant name.
func UsageOf(active []Job) map[string]Usage {
	out := map[string]Usage{}
	for _, j := range active {
		u := out[j.Tenant]
		if u.Jobs == nil {
			u.Jobs = map[State]int{}
		}
		u.Jobs[j.State]++
		u.Workers += j.Workers.Current
		u.GPUs += j.Workers.Current * j.Spec.GPUsPerWorker
		out[j.Tenant] = u
	}
	return out
}
