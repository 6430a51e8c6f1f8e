package nonneg

import "fmt"

// A Field is one named value of a configuration; make it with Of.
type Field struct {
	name     string
	value    any
	negative bool
}

// Of is the field called name (as errors name it) with value v; a
// time.Duration is an ~int64.
func Of[T ~int | ~int64 | ~float64](name string, v T) Field {
	return Field{name: name, value: v, negative: v < 0}
}

// First returns an error naming the first of fields that is negative,
// prefixed by who (the package or component: "jobstore"), or nil when
// none is. Durations print as durations ("-1s"), numbers as %v does.
func First(who string, fields ...Field) error {
	for _, f := range fields {
		if f.negative {
			return fmt.Errorf("%s: %s %v: must not be negative", who, f.name, f.value)
		}
	}
	return nil
}
