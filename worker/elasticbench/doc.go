// Package elasticbench measures the elastic worker with real processes:
// pauses caused by a join and a graceful leave, recovery from a SIGKILL,
// the stop-checkpoint-restart baseline, coordination overhead against a
// fixed world without Redis, and the sample accounting. It starts its own
// redis-server and runs `edl worker` processes; it asserts nothing.
package elasticbench
