// Package dlsim replays deadline jobs (ElasticFlow's trace format, or edl's
// own traces with deadlines drawn the way ElasticFlow draws them) on a
// simulated cluster and counts the jobs that meet their deadline: the
// serverless form of edl, where a job states its work and a deadline and
// the planner picks its GPUs (planner.Admit, planner.PlanDeadlines), against
// baselines that know nothing of deadlines (Tiresias, edl's elastic
// E-Tiresias through planner.Decide) or only order by them (EDF).
//
// A job's speed at each GPU count is its throughput table (iterations per
// second), known to every policy, as in ElasticFlow's simulator. A resize
// stalls the job for what edl measures (ResizeCosts). The deadline met
// ratio is ElasticFlow's: jobs finished by their deadline over all jobs
// (a refused job counts as missed).
//
// It does no I/O beyond the readers it is handed; it must not import
// anything of edl's but planner and jobs.
package dlsim
