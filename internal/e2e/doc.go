// Package e2e holds end-to-end tests that run the real edl binary: `edl dev`
// with its child redis-server, planner, local cluster and worker processes,
// driven over HTTP as a user would. It has no non-test code.
package e2e
