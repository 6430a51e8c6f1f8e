// Command testsum reads `go test -json` on standard input and prints what a
// plain `go test` would (each package's ok/FAIL line, the whole output of
// every failed test and of a package that failed outside any test), then a
// short summary: packages, tests passed/failed/skipped, minutes, and the
// slowest packages and tests. It exits 1 when any package or test failed.
//
// A package whose test binary died without a test failing (killed by a
// signal, os.Exit, a timeout panic) still gets its last lines of output
// printed, so a failure never comes without output.
//
// Usage: go test -json ./... | go run ./scripts/testsum [-json FILE] [-slowest N]
//
// It only reads and prints; it never runs tests itself.
package main
