// Package planner owns edl's elastic scheduling policy: Decide, a pure and
// deterministic function from a Snapshot of the cluster (GPU capacity per
// node, tenants, live jobs with their bounds, attained service and measured
// throughput) and the time to a Plan (a target worker count, a placement and a
// reason per job). The same Decide runs in the service's planner loop and in
// the trace simulator (planner/sim). The service side (the lease, the
// loop, Apply and the callbacks) is package planner/loop.
//
// The policy, in order (see docs/planner.md):
//
//  0. jobs with a deadline get the share PlanDeadlines plans for them
//     (earliest deadline first, the least workers that meet each deadline)
//     before anyone else; Admit is the admission test over the same plan
//     (docs/deadlines.md);
//  1. guaranteed jobs get their minimum, gang style (all of it or none), in
//     order of tenant fairness (share of quota, then weighted share) and
//     least attained service, or, when the snapshot carries a
//     ServiceHistory of finished jobs, Tiresias' first queue and then a
//     Gittins index learnt from that history (gittins.go);
//  2. spare GPUs go one worker at a time to the job with the largest marginal
//     throughput gain, up to its maximum (the EDL paper's E-Tiresias); when
//     more than Config.CompactThreshold jobs would wait, running jobs are
//     first compacted to their minimum;
//  3. opportunistic jobs take only what guaranteed jobs leave and are shrunk
//     or suspended first;
//  4. a cooldown and a per-resize cost keep jobs from flapping.
//
// Decide does no I/O, reads no clock and takes no context; everything it
// needs is in the Snapshot. It must not import anything of edl's but jobs.
package planner
