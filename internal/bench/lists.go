package bench

import (
	"strconv"
	"strings"
)

// intList reads a flag's comma-separated integers (spaces around each
// allowed), each of which ok accepts; when one is not an integer or ok
// refuses it, good is false and bad is that element, for the caller's
// usage error.
func intList(v string, ok func(int) bool) (ns []int, bad string, good bool) {
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || !ok(n) {
			return nil, s, false
		}
		ns = append(ns, n)
	}
	return ns, "", true
}

// nameList reads a flag's comma-separated names (spaces around each and
// empty elements ignored), each one of allowed; when one is not, good is
// false and bad is that name, for the caller's usage error.
func nameList(v string, allowed []string) (names []string, bad string, good bool) {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		known := false
		for _, a := range allowed {
			known = known || a == s
		}
		if !known {
			return nil, s, false
		}
		names = append(names, s)
	}
	return names, "", true
}
