// Package coord owns a job's coordination state in Redis: membership with
// heartbeat leases, the leader lease with its fencing number, generations
// (numbered, ordered member lists) and failure reports. Every key of a job
// shares the hash tag {<job>} under a configurable prefix, so Lua scripts may
// touch several keys on a Redis Cluster.
//
// It decides nothing about training and never touches the data plane: it
// says who is in which generation and who is leader. The data pipeline lives
// in worker/datapipe, the step loop in worker.
package coord
