// Package jobmetrics is a job's metric log in Redis: the values a job's
// training reports per step (the built-in trainer's loss, an exec
// program's lines of $EDL_METRICS_FILE), one stream per job under the
// job's hash tag, so that a worker's Redis user (limited to its job's
// keys) may write it. The sweep controller reads it to judge trials.
//
// It stores and reads points; it does not interpret them.
package jobmetrics
