// Package csvhead reads the CSV traces the simulators replay (planner/sim's
// traces and sweep manifests, planner/dlsim's ElasticFlow traces) by their
// header row: which column holds each name, whether every column a reader
// needs is there, and the records after it, whether a key column repeats
// a value and whether any record was kept, with errors that name the file
// and the line.
package csvhead
