// Package clustertest is the contract every planner-loop Cluster keeps, as one
// set of cases run against each backend (local.Cluster, nomadx.Cluster on
// nomadtest, the planner loop's test fake): call Run from a _test.go file
// of the backend's package.
package clustertest
