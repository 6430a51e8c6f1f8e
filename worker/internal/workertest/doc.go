// Package workertest is what the worker mode packages' tests share: a
// Cluster of real worker processes of one job against a test Redis (the
// test binary re-run with EDL_WORKER_CHILD set; Main and ChildSetup are
// the child's side), a small spec, an in-memory job source (ExecJobs), a
// per-test logger and seed. Only tests import it.
package workertest
