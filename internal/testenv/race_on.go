//go:build race

package testenv

// RaceEnabled reports whether this binary was built with the race detector.
const RaceEnabled = true
