// Package bench is `edl bench`: each benchmark registers itself from init
// in a file of its own and prints its figures as JSON lines and a table.
//
// It may import test rigs (nomadx/nomadtest, checkpoint/weed, child
// redis-servers); no product package (api, planner, worker, local, nomadx,
// checkpoint, jobs) imports it, and cmd/edl only in bench.go, so the rigs
// never reach `edl serve`, `edl dev` or `edl worker` (TestProductDoesNotLinkRigs).
package bench
