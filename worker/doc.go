// Package worker is the elastic worker: the process that runs in every
// allocation of a job. This package is its front, what cmd/edl, local and
// the benches call (Config, Deps, New, NewExec); it picks the mode and
// holds no logic of its own. The worker is one core and three modes, each
// mode a package that composes the core and imports no other mode:
//
//   - worker/core: what every mode shares: Config and Deps, the
//     membership (member record, leader, generations and the generation
//     wait, leave and stop requests), the data cursor and its committer,
//     the step block (one layout) and decideStep, the progress state, the
//     reporter, the program start (reaper, containment, environment) and
//     ProgramWorker, the part of a worker that runs a user's program;
//   - worker/builtin: the built-in trainer, in process (New);
//   - worker/restart: trainer.kind "exec", the program restarted at every
//     generation change (docs/exec.md);
//   - worker/live: exec.mode "live", the program kept running through
//     generations, served over a socket (docs/live.md).
//
// It does not schedule (the planner does), does not decide generations
// (coord.Decide does, run by the leader) and does not do the math (trainer,
// collective). docs/worker-protocol.md is the whole protocol.
package worker
