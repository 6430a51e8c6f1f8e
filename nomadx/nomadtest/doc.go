// Package nomadtest is a fake Nomad HTTP API for tests: an httptest server
// that answers the real github.com/hashicorp/nomad/api client with Nomad's
// JSON (built from the nomad/api structs, keys sorted as Nomad sends them),
// its plain-text error bodies and status codes, X-Nomad-Index headers and
// blocking queries, and a small model of the scheduler: nodes with
// nvidia/gpu device groups, device feasibility per node (count and
// constraints), blocked placement when nothing fits, scale-in stopping the
// highest name indexes, replacement of a stopped allocation under the same
// name index, and batch semantics for allocations that finish.
//
// The shapes, texts and sequences come from real recordings of Nomad 1.6.1
// (testdata/, copied from ../shared/data/nomad); docs/nomad.md lists what it
// reproduces and what it does not.
//
// It owns no edl logic and must not import edl packages: it stands in for
// the operator's cluster, nothing more. Only tests import it.
package nomadtest
