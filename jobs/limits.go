package jobs

import "fmt"

// Per-tenant limits on what one job may ask for, from the tenants file
// (max_workers, max_parameters). They narrow the global bounds of
// validate.go (MaxWorkers, MaxParameters); 0 leaves the global bound.

func checkLimits(v *ValidationError, field string, tn Tenant) {
	if tn.MaxWorkers < 0 || tn.MaxWorkers > MaxWorkers {
		v.add(field+".max_workers", "must be between 0 (the global bound, %d) and %d", MaxWorkers, MaxWorkers)
	}
	if tn.MaxParameters < 0 || tn.MaxParameters > MaxParameters {
		v.add(field+".max_parameters", "must be between 0 (the global bound, %d) and %d", MaxParameters, MaxParameters)
	}
}

// Admit checks a valid spec against the tenant's limits and returns a
// *ValidationError naming each field over one, or nil. prefix is put
// before the field names ("spec." for a patch).
func (t Tenant) Admit(s Spec, prefix string) error {
	v := &ValidationError{}
	if t.MaxWorkers > 0 {
		if s.Workers.Min > t.MaxWorkers {
			v.add(prefix+"workers.min", "tenant %s may run at most %d workers per job (max_workers)", t.Name, t.MaxWorkers)
		}
		if s.Workers.Max > t.MaxWorkers {
			v.add(prefix+"workers.max", "tenant %s may run at most %d workers per job (max_workers)", t.Name, t.MaxWorkers)
		}
	}
	if b := s.Trainer.Builtin; t.MaxParameters > 0 && b != nil {
		if n := b.Parameters(); n > t.MaxParameters {
			v.add(prefix+"trainer.builtin.model.hidden", "%s", fmt.Sprintf(
				"dataset.features, model.hidden and dataset.classes make %d parameters; tenant %s may use at most %d (max_parameters)",
				n, t.Name, t.MaxParameters))
		}
	}
	return v.orNil()
}
