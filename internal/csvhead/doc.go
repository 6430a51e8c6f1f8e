// Package csvhead reads the header row of the CSV traces the simulators
// replay (planner/sim's traces and sweep manifests, planner/dlsim's
// ElasticFlow traces): which column holds each name, and whether every
// column a reader needs is there.
package csvhead
