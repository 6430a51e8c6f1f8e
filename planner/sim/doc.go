// Package sim replays a GPU-cluster job trace through planner.Decide with a
// discrete-event engine, so that the scheduling policy the service runs can
// be measured on real workloads: job completion times (average and
// percentiles), makespan, queueing delay, GPU utilisation and resizes, for
// the elastic policy and for static baselines (FIFO, Tiresias).
//
// A job's work is its trace duration at its requested GPUs; at other sizes
// its speed follows a planner.ScalingModel whose communication ratio is
// drawn per job from its ID (so runs are reproducible). A resize stalls the
// job for the policy's measured join or leave pause (ResizeCosts), and a
// restart-style one also rolls it back to its last checkpoint; GPUs given
// back are free only after the leave. Options.Load compresses arrivals.
// The engine feeds Decide what a live cluster would: node capacity,
// placements, attained service, and throughput measured at the sizes a job
// has run at. Generate draws a seeded synthetic trace.
//
// It does no I/O beyond reading the trace it is given and drawing plots to
// the writer it is given; it must not import anything of edl's but planner
// and jobs.
package sim
