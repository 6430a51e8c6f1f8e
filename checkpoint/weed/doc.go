// Package weed runs SeaweedFS's all-in-one `weed mini` as a child process
// that serves S3 on loopback, with every port it opens chosen free and one
// static identity, for tests, benchmarks and single-machine use.
//
// It owns only the child process: starting it, waiting until it stores an
// object, stopping, killing and restarting it on the same ports and data.
// It must not be used as a production object store manager.
package weed
