// Package nonneg checks the numeric fields of a configuration that must
// not be negative (counts, limits, durations, where zero takes a default)
// and names the first one that is, in the form every edl Validate uses:
// "jobstore: MaxRetries -1: must not be negative".
package nonneg
