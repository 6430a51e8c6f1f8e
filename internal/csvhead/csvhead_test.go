package csvhead

import (
	"fmt"
	"strings"
	"testing"
)

func TestColumns(t *testing.T) {
	col, err := Columns([]string{"job_id", " submit_s ", "num_gpus"}, "trace", "job_id", "submit_s")
	if err != nil {
		t.Fatal(err)
	}
	if col["job_id"] != 0 || col["submit_s"] != 1 || col["num_gpus"] != 2 {
		t.Fatalf("columns %v", col)
	}
	_, err = Columns([]string{"job_id"}, "trace", "job_id", "duration_s")
	if err == nil || err.Error() != `read trace: no column "duration_s"` {
		t.Fatalf("missing column: %v", err)
	}
}

// A spreadsheet's CSV starts with a UTF-8 byte-order mark: "no column
// job_id" on a header that shows job_id was the answer.
func TestColumnsSkipsByteOrderMark(t *testing.T) {
	col, err := Columns([]string{"\ufeffjob_id", "submit_s"}, "trace", "job_id")
	if err != nil || col["job_id"] != 0 {
		t.Fatalf("columns %v, %v", col, err)
	}
}

func TestReaderRows(t *testing.T) {
	r, err := NewReader(strings.NewReader("a,b\n1,2\n3,4,5\n"), "trace", "b")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line, rec := range r.Rows() {
		got = append(got, fmt.Sprintf("%d:%s", line, rec[r.Col["b"]]))
	}
	if fmt.Sprint(got) != "[2:2]" {
		t.Errorf("rows %v", got)
	}
	if err := r.Err(); err == nil || !strings.HasPrefix(err.Error(), "read trace line 3: ") {
		t.Errorf("Err = %v, want the line named", err)
	}
	if _, err := NewReader(strings.NewReader(""), "trace"); err == nil || err.Error() != "read trace header: EOF" {
		t.Errorf("empty file: %v", err)
	}
}
