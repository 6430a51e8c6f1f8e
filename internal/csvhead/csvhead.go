package csvhead

import (
	"fmt"
	"strings"
)

// Columns maps each name of the header row head (spaces around it
// trimmed) to its column; a name of need missing from it is an error
// "read <what>: no column <name>".
func Columns(head []string, what string, need ...string) (map[string]int, error) {
	col := make(map[string]int, len(head))
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return nil, fmt.Errorf("read %s: no column %q", what, n)
		}
	}
	return col, nil
}
