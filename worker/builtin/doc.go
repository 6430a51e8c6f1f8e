// Package builtin is the worker mode of the built-in trainer: it registers,
// waits to be named in a generation, builds that generation's ring, takes
// the root's training state, and runs the synchronous data-parallel step
// loop in process until the job ends, it is asked to leave, or a newer
// generation replaces its own.
//
// A Worker composes the core's parts (worker/core): mem (Membership), dc
// (DataCursor) and its own trainState (trainstate.go: model, optimizer,
// counters, hand-over). The step loop (step.go) sums the gradient, the
// step's loss and the core's step block in one all-reduce and decides
// with core.DecideStep. It also holds the static baseline (RunStatic).
package builtin
