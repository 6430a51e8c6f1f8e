package jobs

import (
	"strings"
	"testing"
)

// The spec: hidden [8192]x8, 65,536 features, batch 2^20, 1,024
// workers (1.5 G parameters) was accepted. Each field was in range; their
// product is now bounded, and the error names the fields.
func TestSpecProductBounds(t *testing.T) {
	huge := func(s *Spec) {
		b := s.Trainer.Builtin
		b.Model.Hidden = []int{8192, 8192, 8192, 8192, 8192, 8192, 8192, 8192}
		b.Dataset.Features, b.Dataset.Samples, b.Dataset.Partitions = 1<<16, 1<<21, 1024
		b.BatchSize = 1 << 20
		s.Workers = WorkerRange{Min: 1, Max: 1024}
	}
	tests := []struct {
		name   string
		edit   func(*Spec)
		fields []string
	}{
		{"the issue's spec", huge, []string{"trainer.builtin.model.hidden", "trainer.builtin.batch_size"}},
		{"wide model", func(s *Spec) { s.Trainer.Builtin.Model.Hidden = []int{8192, 8192} }, []string{"trainer.builtin.model.hidden"}},
		{"big batch of wide samples", func(s *Spec) {
			s.Trainer.Builtin.BatchSize, s.Trainer.Builtin.Dataset.Features = 1<<20, 1024
		}, []string{"trainer.builtin.batch_size"}},
		{"at the parameter bound", func(s *Spec) {
			// 8 -> 4096 -> 3: 8*4096+4096 + 4096*3+3 well under; 16384 x 4096 just under 64 Mi
			s.Trainer.Builtin.Dataset.Features = 8192
			s.Trainer.Builtin.Model.Hidden = []int{8000}
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			b := *s.Trainer.Builtin
			s.Trainer.Builtin = &b
			tc.edit(&s)
			err := s.Validate()
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			for _, f := range tc.fields {
				wantField(t, err, f, "at most")
			}
			if !strings.Contains(err.Error(), "dataset.features") {
				t.Errorf("error does not name the fields of the product: %v", err)
			}
		})
	}
	if n := validSpec().Trainer.Builtin.Parameters(); n != 8*16+16+16*3+3 {
		t.Errorf("Parameters() = %d, want %d", n, 8*16+16+16*3+3)
	}
}

func TestTenantLimits(t *testing.T) {
	h := HashToken("t")
	ts, err := ParseTenants([]byte("tenants:\n  - name: small\n    token_sha256: " + h + "\n    max_workers: 4\n    max_parameters: 1000\n"))
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := ts.Get("small")
	if tn.MaxWorkers != 4 || tn.MaxParameters != 1000 {
		t.Fatalf("limits not read: %+v", tn)
	}
	s := validSpec()
	if err := tn.Admit(s, ""); err != nil {
		t.Fatalf("spec within limits refused: %v", err)
	}
	s.Workers = WorkerRange{Min: 5, Max: 8}
	err = tn.Admit(s, "spec.")
	wantField(t, err, "spec.workers.min", "max_workers")
	wantField(t, err, "spec.workers.max", "max_workers")
	s = validSpec()
	s.Trainer.Builtin.Model.Hidden = []int{200}
	wantField(t, tn.Admit(s, ""), "trainer.builtin.model.hidden", "max_parameters")
	if err := (Tenant{Name: "free"}).Admit(s, ""); err != nil {
		t.Errorf("a tenant without limits refused: %v", err)
	}
	for _, bad := range []struct{ yaml, field string }{
		{"    max_workers: -1\n", "tenants[0].max_workers"},
		{"    max_workers: 2000\n", "tenants[0].max_workers"},
		{"    max_parameters: -5\n", "tenants[0].max_parameters"},
	} {
		_, err := ParseTenants([]byte("tenants:\n  - name: a\n    token_sha256: " + h + "\n" + bad.yaml))
		wantField(t, err, bad.field, "between")
	}
}
