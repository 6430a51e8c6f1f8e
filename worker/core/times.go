package core

import "strconv"

// Times is how a failure reason counts tries: "1 time", "3 times".
func Times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return strconv.Itoa(n) + " times"
}
