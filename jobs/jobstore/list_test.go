package jobstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

func TestListPaginationStableUnderInserts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var ids []string // oldest first
	for i := 0; i < 7; i++ {
		j, _, err := s.Create(ctx, "t", spec(fmt.Sprint("job", i), nil), "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if _, _, err := s.Create(ctx, "other", spec("x", nil), ""); err != nil {
		t.Fatal(err)
	}
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		jobsPage, next, err := s.List(ctx, jobs.ListQuery{Tenant: "t", Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobsPage {
			seen = append(seen, j.ID)
		}
		if page == 0 {
			// New jobs arrive while the client pages: they are newer than the
			// cursor, so they must not appear and nothing may repeat or vanish.
			for i := 0; i < 3; i++ {
				s.Create(ctx, "t", spec("late", nil), "")
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	var want []string
	for i := len(ids) - 1; i >= 0; i-- {
		want = append(want, ids[i])
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("paged ids\n got %v\nwant %v", seen, want)
	}
}

func TestListExactPageHasNoNext(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for i := 0; i < 4; i++ {
		s.Create(ctx, "t", spec("a", nil), "")
	}
	page, next, err := s.List(ctx, jobs.ListQuery{Tenant: "t", Limit: 4})
	if err != nil || len(page) != 4 || next != "" {
		t.Errorf("exact page: %d jobs, next %q, err %v", len(page), next, err)
	}
	page, next, _ = s.List(ctx, jobs.ListQuery{Tenant: "nobody"})
	if len(page) != 0 || next != "" {
		t.Errorf("empty tenant: %d %q", len(page), next)
	}
}

func TestListFilters(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	mk := func(name string, labels map[string]string) string {
		j, _, err := s.Create(ctx, "t", spec(name, labels), "")
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	a := mk("a", map[string]string{"team": "vision", "env": "prod"})
	b := mk("b", map[string]string{"team": "vision"})
	c := mk("c", map[string]string{"team": "nlp"})
	if _, err := s.Transition(ctx, b, jobs.Cancelling, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    jobs.ListQuery
		want []string
	}{
		{"all", jobs.ListQuery{}, []string{c, b, a}},
		{"label", jobs.ListQuery{Labels: map[string]string{"team": "vision"}}, []string{b, a}},
		{"two labels", jobs.ListQuery{Labels: map[string]string{"team": "vision", "env": "prod"}}, []string{a}},
		{"status", jobs.ListQuery{States: []jobs.State{jobs.Pending}}, []string{c, a}},
		{"status and label", jobs.ListQuery{States: []jobs.State{jobs.Cancelling}, Labels: map[string]string{"team": "vision"}}, []string{b}},
		{"two states", jobs.ListQuery{States: []jobs.State{jobs.Cancelling, jobs.Pending}, Limit: 1}, []string{c}},
		{"no match", jobs.ListQuery{Labels: map[string]string{"team": "x"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Tenant = "t"
			page, _, err := s.List(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range page {
				got = append(got, j.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	bad := []jobs.ListQuery{{Limit: 501}, {Limit: -1}, {Cursor: "garbage"}, {Cursor: "c1.!!"}, {States: []jobs.State{"nope"}}}
	for _, q := range bad {
		q.Tenant = "t"
		var ve *jobs.ValidationError
		if _, _, err := s.List(ctx, q); !errors.As(err, &ve) {
			t.Errorf("List(%+v) = %v, want a validation error", q, err)
		}
	}
}
