package csvhead

import (
	"fmt"
	"strings"
)

// Columns maps each name of the header row head (spaces around it and a
// UTF-8 byte-order mark before the first trimmed) to its column; a name of need missing from it is an error
// "read <what>: no column <name>".
func Columns(head []string, what string, need ...string) (map[string]int, error) {
	col := make(map[string]int, len(head))
	for i, h := range head {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // the byte-order mark spreadsheets write
		}
		h = strings.TrimSpace(h)
		if _, dup := col[h]; dup && h != "" {
			// Which of the two a reader took would be a guess.
			return nil, fmt.Errorf("read %s: column %q twice in the header", what, h)
		}
		col[h] = i
	}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return nil, fmt.Errorf("read %s: no column %q", what, n)
		}
	}
	return col, nil
}
