// Package worker is the elastic worker: the process that runs in every
// allocation of a job. It registers in Redis, bids for leadership, waits to
// be named in a generation, builds that generation's ring, takes the root's
// training state, and runs the synchronous data-parallel step loop with the
// built-in trainer until the job ends, it is asked to leave, or a newer
// generation replaces its own.
//
// Each step's all-reduce carries, after the gradient, a small block of
// metadata (loss, sample count, votes to switch generation or stop, and each
// rank's data consumption and leave flag), so every member reaches the same
// decision at the same step boundary without asking Redis. The block
// always travels as float32 (collective's AllReduceExactTail), even when
// the gradient is compressed to fp16. See docs/worker-protocol.md for the
// whole protocol, and worker/datapipe's doc for why each sample is used
// exactly once.
//
// A Worker is made of three parts, each with its invariants written in
// its doc comment: membership (membership.go: member record, leader,
// generations, leave and stop requests), dataCursor (datacursor.go: the
// partition held and its commits: flush before claim, asOf) and
// trainState (trainstate.go: model, optimizer, counters, hand-over). The
// step loop (step.go) composes them; its decision after each all-reduce
// is decideStep (livedecide.go), shared with live mode.
//
// For a job with trainer.kind "exec", ExecWorker (exec*.go) takes the
// worker's place: the same membership (it embeds membership: leader,
// generations, leave and stop requests), but instead of training in
// process it runs the user's program with torchrun's environment and
// restarts it at every generation change, moving the program's checkpoint
// folder through the store (docs/exec.md). In live mode (live*.go) it
// keeps the program running through generations and serves it the
// protocol with the built-in trainer's code: membership, a dataCursor and
// a progressState (advance).
//
// It does not schedule (the planner does), does not decide generations
// (coord.Decide does, run by the leader) and does not do the math (trainer,
// collective).
package core
