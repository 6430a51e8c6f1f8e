// Command edl runs elastic deep-learning training jobs: the API and planner
// (serve), the per-allocation worker (worker), everything on one machine (dev),
// benchmarks (bench) and the trace simulator (sim).
package main
