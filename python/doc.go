// Package python holds the edl Python package (python/edl); this Go test
// runs its pytest suite so `make test` and CI run it. With CI=true a
// missing interpreter, torch or pytest fails the test instead of skipping.
package python
