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
//
// # Exactly once
//
// The guarantee: every sample of an epoch goes into exactly one applied
// step, whatever joins, leaves or dies. It rests on one fact of the step
// loop and five mechanisms; each is named here with the places that make
// it (file: function), so that a second data plane (a user's program
// driving the same protocol) can keep every one of them.
//
// The fact: a step is applied only when its all-reduce completed, and that
// needs every member's contribution, so the members' applied steps differ
// by at most one. The root of the next generation is a survivor with the
// highest applied step, L; its state decides where the data stands
// (coord/decide.go: Decide picks it; worker/step.go: (*Worker).train
// applies only after AllReduceExactTail returned without error, and what
// it does then is worker/livedecide.go: decideStep's verdict, read off the
// summed block alone, so identical on every member, for both data planes).
//
// The worker's side is in three parts of worker.Worker, each with its
// invariants in its doc comment: worker/membership.go: membership (member
// record, leader, generations, leave and stop requests),
// worker/datacursor.go: dataCursor (the partition held, its commits: the
// sites of 2 and 4 below) and worker/trainstate.go: trainState (model,
// optimizer, the counters and consumption at L, the hand-over).
//
// 1. Consumption at step L. Every step's all-reduce carries, after the
// gradient, each rank's slot: partition+1, start, end and the fin and
// leave flags; a rank writes only its own slot, so after the sum every
// member holds what every rank consumed in that step, exactly (the tail
// travels as float32 even with fp16 compression). Each member keeps the
// last applied step's slots as its "consumption at L" in its training
// state, and the root's copy goes into reconcile. A member that died
// before its commit of step L landed is thereby still accounted for.
// Sites: worker/meta.go: putSlot, exactMeta (the block as integers, in
// live mode's layout); worker/livedecide.go: liveSlot, liveConsumption;
// worker/step.go: (*Worker).train (putSlot, AllReduceExactTail),
// (*Worker).apply (worker/state.go: (*progressState).advance keeps
// Meta); worker/collective/allreduce.go: (*Ring).AllReduceExactTail;
// worker/datacursor.go: (*dataCursor).reconcile (Reconciliation.Meta,
// called by worker/loop.go: (*Worker).join and worker/restore.go:
// (*Worker).joinRestore); here: reconcileScript's second pass.
//
// 2. Flush before claim. A member never takes part in a step after the one
// that used up its partition before the commit marking that partition
// finished (fin) has landed in Redis. Otherwise the member could die with
// its last commit in flight, and the root, whose consumption at L is that
// of a later step, would put the "unfinished" partition back in the queue
// at its last landed offset: samples used twice. Cursors of the same
// epoch may be merged while Redis is away (only the newest matters); an
// older epoch's cursor is sent before a newer one.
// Sites: worker/datacursor.go: (*dataCursor).claim (committer.flush, then
// Pipe.Claim; called by worker/step.go: (*Worker).train before every
// step); worker/commit.go: (*committer).flush, (*committer).add (sendNow
// for the older epoch), (*committer).run.
//
// 3. The one-level rollback. A record keeps the commit before its current
// one (poff, pstep, pfin). Since applied steps differ by at most one, a
// member can have committed at most one step past L (a step the others
// never applied because the ring broke in it); reconcile rolls every record
// whose step is after L back to its previous commit, which is then at or
// before L. One level is enough, and it is the most the fact allows.
// Sites: here: commitScript (shifts off/step/fin into poff/pstep/pfin when
// a newer step commits), reconcileScript's first pass (step > L: restore
// the previous commit).
//
// 4. asOf. A claim is stamped with the claimer's last applied step (its
// asOf) as both its current and its previous commit, so the record says
// truthfully "offset off as of step asOf". Reconcile judges every record by
// comparing its step with L, a claimed-but-unused partition included: one
// claimed after L (by a member that applied L+1) rolls back to the offset
// it was claimed at, and one claimed before L whose first use was in step
// L counts as older than L and takes step L's consumption (its claimer may
// have died before that commit landed).
// Sites: worker/datacursor.go: (*dataCursor).claim (asOf: worker/step.go:
// (*Worker).train passes trainState's st.Applied); here: (*Pipe).Claim,
// claimScript.
//
// 5. The commit fence. Reconcile ends by writing commitfence = "G|L": a
// commit from a generation older than G for a step after L is a step that
// G discarded, and commitScript refuses it (ErrFenced), debug records
// included; a member of the old ring that had not yet noticed the failure
// cannot write a discarded step's cursor after the rollback. Reconcile,
// claim and checkpoint restore also refuse to run for a generation older
// than gennum (ErrStaleGeneration): a late reconcile of a dead generation
// would otherwise roll a newer generation's applied step back.
// Sites: here: reconcileScript (SET commitfence; the gennum check),
// commitScript (fenced), claimScript (gennum check); snapshot.go:
// (*Pipe).Restore; worker/commit.go: (*committer).run and sendNow drop
// ErrFenced and ErrNotOwner commits; worker/retry.go: retry gives up at
// once on ErrStaleGeneration.
//
// The second data plane is live mode (a user's PyTorch program with the
// edl Python package, worker/live): the program's metadata all-reduce
// carries the same slots (float64), and its worker keeps every mechanism
// with the same code as the built-in trainer, its own dataCursor and
// progressState: 1 in worker/live
// ((*progressState).advance, (*dataCursor).applied) and liveJoin
// ((*dataCursor).reconcile; worker/liveckpt.go: (*liveCkpt).restore for a
// checkpoint's state); 2 and 4 in (*liveWorker).liveClaim, which is
// (*dataCursor).claim (asOf: its st.Applied); 3 and 5 by the same
// Reconcile and commitScript. Only the partition order differs: not
// shuffled (seed 0), partitions as worker/livedecide.go: livePartition
// cuts them.
//
// The proof that all of this holds is the per-sample accounting of the
// worker's multi-process tests: in debug mode every applied step records
// which samples it used (commitScript writes them, reconcile drops those
// after L), and worker/samples.go: CheckSamples counts samples missed and
// repeated per epoch.
package datapipe
