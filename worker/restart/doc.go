// Package restart is the worker mode of trainer.kind "exec" (the default
// exec.mode): instead of training in process it runs the user's program
// with torchrun's environment and restarts it at every generation change,
// moving the program's checkpoint folder through the store (docs/exec.md).
// A Worker is a core.ProgramWorker (membership, reporter, folder) and
// what restart mode adds: the barrier and peer checks of a generation
// (execdecide.go, pure), the restart count, the folder's sync (execckpt.go).
package restart
