// Package datapipe is the dynamic data pipeline of an elastic job in Redis:
// per epoch a queue of partitions that workers claim on demand, a record per
// claimed partition holding its owner and committed offset, and the Lua
// scripts that claim, commit, release and reconcile them.
//
// A partition record is "owner|off|step|fin|poff|pstep|pfin": the offset
// committed as of applied step `step` (fin set once the partition is used up)
// and the commit before it, so the root of a new generation can roll back a
// commit made by a member that applied a step the survivors did not.
//
// It knows nothing of models, rings or leaders: it is told the generation,
// the step and the offsets, and refuses writes from a superseded generation
// (the commit fence).
package datapipe
