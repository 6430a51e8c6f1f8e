// Package warm starts a restart-mode program's Python interpreter ahead of
// need: the job's interpreter, with the job's interpreter options, imports
// what the job preloads (torch by default) while the previous run still
// trains, and when the generation starts it gets the generation's
// environment on a pipe and runs the unmodified script as `python SCRIPT
// ARGS` would (boot.py). A restart then costs the program's own set-up
// (its process group, its data), not the interpreter's start and `import
// torch`.
//
// Each warm interpreter runs the program once: the next generation gets a
// fresh one, started while this one trains. Nothing is forked from a warm
// process, so CUDA or threads started by a preload cannot be inherited in
// a broken state; the price is one idle interpreter per worker.
//
// Parse says which command lines can start warm (a Python interpreter with
// a script file or -m module); the others start cold, as before.
package warm
