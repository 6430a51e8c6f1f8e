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

// The line an error names is the file's: blank lines are skipped and a
// quoted field spans lines, so a count of records named line 3 for a bad
// row on line 5.
func TestReaderNamesTheFilesLine(t *testing.T) {
	r, err := NewReader(strings.NewReader("a,b\n1,2\n\n\"x\ny\",3\n\n5,6\n7\n"), "trace", "b")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line, rec := range r.Rows() {
		got = append(got, fmt.Sprintf("%d:%s", line, rec[r.Col["b"]]))
	}
	if fmt.Sprint(got) != "[2:2 4:3 7:6]" {
		t.Errorf("rows %v, want [2:2 4:3 7:6]", got)
	}
	if err := r.Err(); err == nil || err.Error() != "read trace line 8: 1 fields, the header has 2" {
		t.Errorf("Err = %v", err)
	}
	r, _ = NewReader(strings.NewReader("a,b\n\n1,x\"y\n"), "trace")
	for range r.Rows() {
	}
	if err := r.Err(); err == nil || !strings.HasPrefix(err.Error(), "read trace line 3, column 4: ") {
		t.Errorf("bare quote: %v", err)
	}
}

func TestColumnsRefusesANameTwice(t *testing.T) {
	if _, err := Columns([]string{"job_id", "submit_s", " job_id"}, "trace", "job_id"); err == nil || err.Error() != `read trace: column "job_id" twice in the header` {
		t.Errorf("duplicate column: %v", err)
	}
	if _, err := Columns([]string{"job_id", "", ""}, "trace", "job_id"); err != nil {
		t.Errorf("unnamed columns: %v", err)
	}
}

func TestReaderUniqueAndDone(t *testing.T) {
	r, err := NewReader(strings.NewReader("id,v\na,1\nb,2\na,3\n"), "trace", "id")
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for line, rec := range r.Rows() {
		if err := r.Unique("id", rec[r.Col["id"]], line); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if want := `[read trace line 4: id "a" already on line 2]`; fmt.Sprint(errs) != want {
		t.Errorf("Unique: %v, want %s", errs, want)
	}
	if err := r.Done(3, "jobs"); err != nil {
		t.Errorf("Done with records kept: %v", err)
	}
	if err := r.Done(0, "jobs"); err == nil || err.Error() != "read trace: no jobs" {
		t.Errorf("Done with none kept: %v", err)
	}
	bad, err := NewReader(strings.NewReader("id\n\"a\n"), "trace", "id")
	if err != nil {
		t.Fatal(err)
	}
	for range bad.Rows() {
	}
	if err := bad.Done(0, "jobs"); err == nil || err != bad.Err() {
		t.Errorf("Done after a bad record = %v, want Err's %v", err, bad.Err())
	}
}

func TestSortedJobs(t *testing.T) {
	type job struct {
		submit float64
		id     string
	}
	r, err := NewReader(strings.NewReader("id\n"), "trace", "id")
	if err != nil {
		t.Fatal(err)
	}
	key := func(j job) (float64, string) { return j.submit, j.id }
	got, err := SortedJobs(r, []job{{2, "a"}, {1, "c"}, {1, "b"}, {0, "z"}}, key)
	if err != nil || fmt.Sprint(got) != "[{0 z} {1 b} {1 c} {2 a}]" {
		t.Errorf("SortedJobs = %v, %v", got, err)
	}
	if _, err := SortedJobs(r, nil, key); err == nil || err.Error() != "read trace: no jobs" {
		t.Errorf("no jobs: %v", err)
	}
}
