// Package sweepsim replays a hyperparameter sweep on a simulated cluster:
// the trials' jobs advance by a step-time and scaling model, report a
// learning curve (seeded, or a recorded metric log), and the sweep
// controller's own pure decision (jobs/sweep.Decide) starts, cuts,
// promotes and sizes them every round, as planner/sweeploop does on a
// real cluster. Run twice, once elastic (the template's workers range)
// and once static (every trial at workers.min), it measures what handing
// a cut trial's workers to the survivors buys: wall time, slot-seconds
// used and idle, the best trial found. `edl sim --sweep-file` prints it.
package sweepsim
