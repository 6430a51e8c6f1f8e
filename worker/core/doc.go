// Package core is what the worker's three modes (worker/builtin,
// worker/restart, worker/live) share; it imports none of them.
//
// Its parts, each with its invariants in its doc comment:
//
//   - Membership (membership.go): the member record, the bid for
//     leadership, the generations watched (NextGen for the built-in step
//     loop, WaitGen for the program modes), the requests to leave or stop
//     that reach a worker off its loop (Poll, Listen);
//   - DataCursor (datacursor.go, commit.go): the partition held and its
//     commits: flush before claim, asOf;
//   - the step block (block.go): the metadata each step's all-reduce
//     carries, in one layout for the built-in trainer (float32) and live
//     mode (the program's float64 tensor), and DecideStep, the pure
//     decision after the all-reduce, identical on every member;
//   - ProgressState (state.go): the training counters and every rank's
//     consumption in the last applied step;
//   - Reporter (report.go): progress, events and state changes to the job;
//   - the program start (execproc.go, reaper.go, contain.go, execenv.go):
//     a user's program under a reaper, contained, with torchrun's
//     environment;
//   - ProgramWorker (program.go): config, spec, membership, reporter and
//     folder of a worker that runs a user's program (restart and live).
//
// Each step's all-reduce carries, after the gradient, a small block of
// metadata (loss, sample count, votes to switch generation or stop, and each
// rank's data consumption and leave flag), so every member reaches the same
// decision at the same step boundary without asking Redis. The block
// always travels as float32 (collective's AllReduceExactTail), even when
// the gradient is compressed to fp16. See docs/worker-protocol.md for the
// whole protocol, and worker/datapipe's doc for why each sample is used
// exactly once.
package core
