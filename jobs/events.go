package jobs

import (
	"regexp"
	"strconv"
	"strings"
)

// streamIDRE is a Redis stream ID as event IDs carry it ("ms-seq").
var streamIDRE = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

// ValidEventID reports whether id can be used as an events cursor: a Redis
// stream ID whose two parts each fit in an unsigned 64-bit integer (Redis
// refuses larger ones, which must be the client's fault, not a 500).
func ValidEventID(id string) bool {
	if !streamIDRE.MatchString(id) {
		return false
	}
	ms, seq, _ := strings.Cut(id, "-")
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}
