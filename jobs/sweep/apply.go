package sweep

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/jobs"
)

// aliases are short names a spec path may use for a field.
var aliases = map[string]string{"trainer.builtin.lr": "trainer.builtin.learning_rate"}

// Apply returns the template with params set: each key with a dot is a
// spec path (JSON names, array indexes as numbers), each other key
// replaces ${params.KEY} in an exec trainer's command and env values. The
// result is decoded strictly, defaulted and validated as a submitted job
// spec would be, so a path to nowhere or a value of the wrong type is an
// error naming the path.
func Apply(template jobs.Spec, params map[string]any) (jobs.Spec, error) {
	raw, err := json.Marshal(template)
	if err != nil {
		return jobs.Spec{}, fmt.Errorf("encode template: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return jobs.Spec{}, fmt.Errorf("decode template: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !strings.Contains(k, ".") {
			continue
		}
		path := k
		if a, ok := aliases[k]; ok {
			path = a
		}
		if err := setPath(doc, strings.Split(path, "."), params[k]); err != nil {
			return jobs.Spec{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	if ex, ok := doc["trainer"].(map[string]any)["exec"].(map[string]any); ok {
		if cmd, ok := ex["command"].([]any); ok {
			for i, a := range cmd {
				if s, ok := a.(string); ok {
					cmd[i] = substitute(s, params)
				}
			}
		}
		if env, ok := ex["env"].(map[string]any); ok {
			for n, a := range env {
				if s, ok := a.(string); ok {
					env[n] = substitute(s, params)
				}
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return jobs.Spec{}, fmt.Errorf("encode trial spec: %w", err)
	}
	spec, err := jobs.DecodeSpec(out)
	if err != nil {
		return jobs.Spec{}, fmt.Errorf("trial spec: %w", err)
	}
	return spec, nil
}

func setPath(node any, path []string, v any) error {
	seg := path[0]
	switch n := node.(type) {
	case map[string]any:
		if len(path) == 1 {
			n[seg] = v
			return nil
		}
		next, ok := n[seg]
		if !ok || next == nil {
			next = map[string]any{}
			n[seg] = next
		}
		return setPath(next, path[1:], v)
	case []any:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(n) {
			return fmt.Errorf("%q: not an index of the template's array of %d", seg, len(n))
		}
		if len(path) == 1 {
			n[i] = v
			return nil
		}
		return setPath(n[i], path[1:], v)
	default:
		return fmt.Errorf("%q: the template has a value there, not an object or array", seg)
	}
}

// placeholders are the parameter names an exec template refers to.
func placeholders(t jobs.Spec) map[string]bool {
	out := map[string]bool{}
	if t.Trainer.Exec == nil {
		return out
	}
	find := func(s string) {
		for _, m := range placeRE.FindAllStringSubmatch(s, -1) {
			out[m[1]] = true
		}
	}
	for _, a := range t.Trainer.Exec.Command {
		find(a)
	}
	for _, v := range t.Trainer.Exec.Env {
		find(v)
	}
	return out
}

func substitute(s string, params map[string]any) string {
	return placeRE.ReplaceAllStringFunc(s, func(m string) string {
		name := placeRE.FindStringSubmatch(m)[1]
		v, ok := params[name]
		if !ok {
			return m
		}
		return Format(v)
	})
}

// Format writes a parameter's value as a program argument: numbers in
// their shortest form, strings as they are, anything else as JSON.
func Format(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Sample draws trial index's parameters. Each trial has its own stream
// seeded by (seed, index), so trial i's parameters do not depend on how
// many trials there are or in which order they were drawn.
func Sample(s Spec, index int) map[string]any {
	r := rand.New(rand.NewPCG(uint64(s.Seed), uint64(index)))
	out := make(map[string]any, len(s.Parameters))
	for _, k := range slices.Sorted(maps.Keys(s.Parameters)) {
		p := s.Parameters[k]
		switch p.Type {
		case Choice:
			out[k] = p.Values[r.IntN(len(p.Values))]
		case Uniform:
			out[k] = *p.Min + r.Float64()*(*p.Max-*p.Min)
		case LogUniform:
			lo, hi := math.Log(*p.Min), math.Log(*p.Max)
			out[k] = math.Exp(lo + r.Float64()*(hi-lo))
		case Int:
			lo, hi := int64(*p.Min), int64(*p.Max)
			out[k] = lo + r.Int64N(hi-lo+1)
		}
	}
	return out
}

// TrialSpec is trial index's job spec: the template with its parameters,
// named "<sweep name>-<index>" and labelled with the sweep and the trial.
func TrialSpec(s Spec, sweepID string, index int, params map[string]any) (jobs.Spec, error) {
	spec, err := Apply(s.Template, params)
	if err != nil {
		return jobs.Spec{}, err
	}
	name := fmt.Sprintf("%s-%d", s.Name, index)
	if len(name) > jobs.MaxNameLen {
		name = fmt.Sprintf("%s-%d", strings.TrimRight(s.Name[:jobs.MaxNameLen-len(strconv.Itoa(index))-1], "-"), index)
	}
	spec.Name = name
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[LabelSweep] = sweepID
	spec.Labels[LabelTrial] = strconv.Itoa(index)
	if err := spec.Validate(); err != nil {
		return jobs.Spec{}, fmt.Errorf("trial spec: %w", err)
	}
	return spec, nil
}

// The labels that tag a trial's job.
const (
	LabelSweep = "edl.sweep"
	LabelTrial = "edl.trial"
)
