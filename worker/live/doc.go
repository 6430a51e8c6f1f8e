// Package live is the worker mode of exec.mode "live" (docs/live.md): the
// program is started once and keeps running through every generation,
// served over a Unix socket (protocol.json describes every message). A
// Worker is a core.ProgramWorker plus what the built-in trainer's worker
// keeps in process: a core.DataCursor and a core.ProgressState, advanced
// with core.DecideStep on the step block the program all-reduces.
package live
