// Package bench is `edl bench`: the benchmarks table (bench.go) names each
// benchmark, whose run lives in a file of its own and prints its figures
// as JSON lines and a table.
//
// It may import test rigs (nomadx/nomadtest, checkpoint/weed, child
// redis-servers); no product package (api, planner, worker, local, nomadx,
// checkpoint, jobs) imports it, and cmd/edl only in bench.go. The fake
// Nomad (`edl bench e2e --nomad`) and the SeaweedFS harness (bench
// checkpoint's s3 figures) sit behind the rigs build tag: an edl built
// without it, the product, says so when asked for them and links neither
// (TestProductDoesNotLinkRigs, TestBinaryLinksHarnessesOnlyWithTheRigsTag).
package bench
