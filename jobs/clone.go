package jobs

// Clone returns a deep copy of the spec.
func (s Spec) Clone() Spec {
	c := s
	if s.GPU != nil {
		g := *s.GPU
		c.GPU = &g
	}
	if s.Labels != nil {
		c.Labels = make(map[string]string, len(s.Labels))
		for k, v := range s.Labels {
			c.Labels[k] = v
		}
	}
	if s.Trainer.Builtin != nil {
		b := *s.Trainer.Builtin
		b.Model.Hidden = append([]int(nil), b.Model.Hidden...)
		c.Trainer.Builtin = &b
	}
	if s.Trainer.Exec != nil {
		e := *s.Trainer.Exec
		e.Command = append([]string(nil), e.Command...)
		if e.Preload != nil {
			e.Preload = append([]string(nil), e.Preload...)
		}
		e.Warm = clonePtr(e.Warm)
		if e.Env != nil {
			e.Env = make(map[string]string, len(s.Trainer.Exec.Env))
			for k, v := range s.Trainer.Exec.Env {
				e.Env[k] = v
			}
		}
		e.Dataset = clonePtr(e.Dataset)
		e.GracePeriodS, e.MaxRestarts = clonePtr(e.GracePeriodS), clonePtr(e.MaxRestarts)
		c.Trainer.Exec = &e
	}
	c.Deadline = clonePtr(s.Deadline)
	return c
}

// Clone returns a copy of j that shares nothing a write to either could
// change in the other: its spec, last checkpoint, planner state and
// deadline figures are copied.
func (j Job) Clone() Job {
	c := j
	c.Spec = j.Spec.Clone()
	c.LastCheckpoint = clonePtr(j.LastCheckpoint)
	c.Planner = j.Planner.Clone()
	c.Deadline, c.ExpectedFinish = clonePtr(j.Deadline), clonePtr(j.ExpectedFinish)
	c.DeadlineResult = clonePtr(j.DeadlineResult)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
