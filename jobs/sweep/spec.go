package sweep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/edl-nomad/edl/jobs"
)

// Bounds of a sweep spec.
const (
	MaxTrials          = 1000
	MaxParameters      = 32
	MaxChoiceValues    = 256
	DefaultReduction   = 4
	MaxReductionFactor = 100
)

// Spec is what a tenant submits: a template job, the parameters to search
// and how trials are scheduled. The JSON names are the public API.
type Spec struct {
	Name     string    `json:"name" validate:"required" maxLength:"63" example:"mlp-lr-width"`
	Template jobs.Spec `json:"template" validate:"required"`
	// Parameters maps a spec path (JSON names with dots, array indexes as
	// numbers: "trainer.builtin.learning_rate", "trainer.builtin.model.hidden.0";
	// "trainer.builtin.lr" is short for the learning rate) or a name used as
	// ${params.NAME} in an exec template's command or env to its domain.
	Parameters    map[string]Parameter `json:"parameters" validate:"required"`
	NumTrials     int                  `json:"num_trials" minimum:"1" maximum:"1000" example:"16"`
	MaxConcurrent int                  `json:"max_concurrent" minimum:"1" maximum:"1000" example:"4"`
	Seed          int64                `json:"seed" example:"1"`
	Metric        Metric               `json:"metric"`
	Scheduler     Scheduler            `json:"scheduler"`
}

// Budget is the workers the sweep may hold at once: its static footprint,
// the trials that run together (max_concurrent, or num_trials when fewer)
// at template.workers.min (at least 1) each. Elastic trials share it; a
// sweep never holds more.
func (s Spec) Budget() int {
	return min(s.MaxConcurrent, s.NumTrials) * max(s.Template.Workers.Min, 1)
}

// ParamType is a parameter's distribution.
type ParamType string

const (
	Choice     ParamType = "choice"     // one of Values, uniformly
	Uniform    ParamType = "uniform"    // a float in [Min, Max)
	LogUniform ParamType = "loguniform" // a float whose log is uniform in [log Min, log Max)
	Int        ParamType = "int"        // an integer in [Min, Max]
)

// Parameter is one dimension of the search space.
type Parameter struct {
	Type   ParamType `json:"type" enum:"choice,uniform,loguniform,int"`
	Values []any     `json:"values,omitempty"`
	Min    *float64  `json:"min,omitempty"`
	Max    *float64  `json:"max,omitempty"`
}

// Mode says whether a smaller or a larger metric is better.
type Mode string

const (
	Min Mode = "min"
	Max Mode = "max"
)

// Metric names the value trials are compared on: "loss" for the built-in
// trainer (its global batch's loss per step), or any name an exec program
// writes to $EDL_METRICS_FILE (restart mode) or reports with ctx.report
// (live mode).
type Metric struct {
	Name string `json:"name" example:"loss"`
	Mode Mode   `json:"mode" enum:"min,max" example:"min"`
}

// Better reports whether a is better than b in this mode.
func (m Metric) Better(a, b float64) bool {
	if m.Mode == Max {
		return a > b
	}
	return a < b
}

// Scheduler is asynchronous successive halving (Li et al., "A System for
// Massively Parallel Hyperparameter Tuning", MLSys 2020), with the names
// Ray Tune's ASHAScheduler uses. Rungs are at grace x reduction_factor^k
// steps below max, and at max; at each rung a trial goes on only if its
// metric is in the top 1/reduction_factor of those recorded there so far.
type Scheduler struct {
	Kind            string `json:"kind" enum:"asha" example:"asha"`
	Grace           int64  `json:"grace" minimum:"1" example:"40"` // steps (or epochs) to the first rung
	Max             int64  `json:"max" minimum:"1" example:"640"`  // steps (or epochs) a trial runs at most
	ReductionFactor int    `json:"reduction_factor" minimum:"2" default:"4" example:"4"`
	// Unit is what grace and max count: "steps" (applied steps, the
	// default) or "epochs" (epochs done: a metric reported at each epoch's
	// end, such as a validation loss, is judged at the epoch it ended).
	Unit string `json:"unit,omitempty" enum:"steps,epochs" default:"steps" example:"steps"`
}

// The scheduler's units.
const (
	UnitSteps  = "steps"
	UnitEpochs = "epochs"
)

// unit is Unit's singular for messages.
func (s Scheduler) unit() string {
	if s.Unit == UnitEpochs {
		return "epoch"
	}
	return "step"
}

// Positions are points placed in the scheduler's unit: each point's Step
// is its position (its step, or with unit "epochs" its epochs done), in
// order. RungValue and the milestones read positions.
func (s Scheduler) Positions(points []Point) []Point {
	if s.Unit != UnitEpochs {
		return points
	}
	out := make([]Point, len(points))
	for i, p := range points {
		out[i] = Point{Step: int64(p.Epoch), Value: p.Value, Epoch: p.Epoch}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Step < out[b].Step })
	return out
}

// Milestones are the rungs' steps, ascending, the last one Max.
func (s Scheduler) Milestones() []int64 {
	var out []int64
	rf := int64(max(s.ReductionFactor, 2))
	for r := s.Grace; r > 0 && r < s.Max; r *= rf {
		out = append(out, r)
	}
	return append(out, s.Max)
}

// WithDefaults fills what may be left out.
func (s Spec) WithDefaults() Spec {
	s.Template = s.Template.WithDefaults()
	if s.Scheduler.ReductionFactor == 0 {
		s.Scheduler.ReductionFactor = DefaultReduction
	}
	return s
}

var (
	nameRE      = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	paramNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	placeRE     = regexp.MustCompile(`\$\{params\.([^}]*)\}`)
)

// Validate checks the spec after WithDefaults; every error names the
// field (a *jobs.ValidationError).
func (s Spec) Validate() error {
	var fs []jobs.FieldError
	add := func(field, format string, args ...any) {
		fs = append(fs, jobs.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if len(s.Name) == 0 || len(s.Name) > jobs.MaxNameLen || !nameRE.MatchString(s.Name) {
		add("name", "must be 1-%d lowercase letters, digits or '-', starting and ending with a letter or digit", jobs.MaxNameLen)
	}
	if s.NumTrials < 1 || s.NumTrials > MaxTrials {
		add("num_trials", "must be between 1 and %d", MaxTrials)
	}
	if s.MaxConcurrent < 1 || s.MaxConcurrent > MaxTrials {
		add("max_concurrent", "must be between 1 and %d", MaxTrials)
	}
	if s.Metric.Name == "" || len(s.Metric.Name) > 64 || !paramNameRE.MatchString(s.Metric.Name) {
		add("metric.name", "required: 1-64 letters, digits or '_' (\"loss\" for the built-in trainer)")
	}
	if s.Template.Trainer.Kind == jobs.TrainerBuiltin && s.Metric.Name != "" && !slices.Contains(jobs.BuiltinMetrics, s.Metric.Name) {
		add("metric.name", "%q: built-in trials report only %s", s.Metric.Name, strings.Join(jobs.BuiltinMetrics, ", "))
	}
	if s.Metric.Mode != Min && s.Metric.Mode != Max {
		add("metric.mode", `must be "min" or "max"`)
	}
	sc := s.Scheduler
	if sc.Kind != "asha" {
		add("scheduler.kind", `must be "asha"`)
	}
	if sc.Unit != "" && sc.Unit != UnitSteps && sc.Unit != UnitEpochs {
		add("scheduler.unit", `must be "steps" or "epochs"`)
	}
	if sc.Grace < 1 {
		add("scheduler.grace", "must be at least 1 (%ss)", sc.unit())
	}
	if sc.Max < 1 || sc.Max < sc.Grace {
		add("scheduler.max", "must be at least scheduler.grace (%ss)", sc.unit())
	}
	if sc.ReductionFactor < 2 || sc.ReductionFactor > MaxReductionFactor {
		add("scheduler.reduction_factor", "must be between 2 and %d", MaxReductionFactor)
	}
	if s.Template.Deadline != nil || s.Template.Within != "" {
		add("template.deadline", "a sweep's trials cannot have deadlines")
	}
	switch {
	case len(s.Parameters) == 0:
		add("parameters", "at least one parameter")
	case len(s.Parameters) > MaxParameters:
		add("parameters", "at most %d parameters", MaxParameters)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Parameters)) {
		fs = append(fs, validateParam(k, s.Parameters[k])...)
	}
	if len(fs) == 0 {
		fs = append(fs, s.validateTemplate()...)
	}
	if len(fs) == 0 {
		return nil
	}
	return &jobs.ValidationError{Fields: fs}
}

func paramField(k string) string { return "parameters[" + k + "]" }

func validateParam(k string, p Parameter) []jobs.FieldError {
	f := paramField(k)
	bad := func(sub, format string, args ...any) []jobs.FieldError {
		return []jobs.FieldError{{Field: f + sub, Reason: fmt.Sprintf(format, args...)}}
	}
	if !strings.Contains(k, ".") && !paramNameRE.MatchString(k) {
		return bad("", "a spec path (with dots) or a ${params.NAME} name of letters, digits and '_'")
	}
	if strings.Contains(k, ".") {
		for _, seg := range strings.Split(k, ".") {
			if seg == "" {
				return bad("", "a spec path has no empty segments")
			}
		}
	}
	switch p.Type {
	case Choice:
		if len(p.Values) == 0 || len(p.Values) > MaxChoiceValues {
			return bad(".values", "1-%d values", MaxChoiceValues)
		}
		if p.Min != nil || p.Max != nil {
			return bad(".min", "a choice has values, not min and max")
		}
	case Uniform, LogUniform, Int:
		if len(p.Values) > 0 {
			return bad(".values", "only a choice has values")
		}
		if p.Min == nil || p.Max == nil || math.IsNaN(*p.Min) || math.IsNaN(*p.Max) || math.IsInf(*p.Min, 0) || math.IsInf(*p.Max, 0) {
			return bad(".min", "min and max are required finite numbers")
		}
		if *p.Max < *p.Min {
			return bad(".max", "must be at least min")
		}
		if p.Type == LogUniform && *p.Min <= 0 {
			return bad(".min", "must be > 0 for loguniform")
		}
		if p.Type == Int && (*p.Min != math.Trunc(*p.Min) || *p.Max != math.Trunc(*p.Max) || math.Abs(*p.Min) > 1<<40 || math.Abs(*p.Max) > 1<<40) {
			return bad(".min", "int bounds must be integers (|x| <= 2^40)")
		}
	default:
		return bad(".type", `must be "choice", "uniform", "loguniform" or "int"`)
	}
	return nil
}

// validateTemplate applies the first value of every parameter's domain
// (and, for choices, every value) to the template and validates the job
// spec each gives, so that a path that does not exist or a value of the
// wrong type is refused at submission, naming the parameter.
func (s Spec) validateTemplate() []jobs.FieldError {
	used := placeholders(s.Template)
	for name := range used {
		if _, ok := s.Parameters[name]; !ok {
			return []jobs.FieldError{{Field: "template.trainer.exec", Reason: fmt.Sprintf("${params.%s} is not a parameter", name)}}
		}
	}
	base := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(s.Parameters)) {
		p := s.Parameters[k]
		if !strings.Contains(k, ".") && !used[k] {
			return []jobs.FieldError{{Field: paramField(k), Reason: "not a spec path, and ${params." + k + "} is not used in template.trainer.exec's command or env"}}
		}
		base[k] = p.corner()
	}
	if _, err := TrialSpec(s, "s-0", s.NumTrials-1, base); err != nil {
		// Name the parameter whose path alone breaks the template (an
		// unknown field, an index past the array) rather than the template.
		for _, k := range slices.Sorted(maps.Keys(s.Parameters)) {
			if !strings.Contains(k, ".") {
				continue
			}
			if _, perr := Apply(s.Template, map[string]any{k: base[k]}); perr != nil {
				return []jobs.FieldError{{Field: paramField(k), Reason: perr.Error()}}
			}
		}
		return []jobs.FieldError{{Field: "template", Reason: err.Error()}}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Parameters)) {
		p := s.Parameters[k]
		var vals []any
		switch p.Type {
		case Choice:
			vals = p.Values
		default:
			vals = []any{p.value(*p.Max)}
		}
		for i, v := range vals {
			params := clone(base)
			params[k] = v
			if _, err := Apply(s.Template, params); err != nil {
				field := paramField(k)
				if p.Type == Choice {
					field += fmt.Sprintf(".values[%d]", i)
				}
				return []jobs.FieldError{{Field: field, Reason: err.Error()}}
			}
		}
	}
	return nil
}

// corner is a value of the domain used to check the template.
func (p Parameter) corner() any {
	if p.Type == Choice {
		return p.Values[0]
	}
	return p.value(*p.Min)
}

func (p Parameter) value(x float64) any {
	if p.Type == Int {
		return int64(x)
	}
	return x
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Clone is a deep copy (through JSON: the spec is plain data).
func (s Spec) Clone() Spec {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("sweep: encode spec: %v", err))
	}
	var c Spec
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("sweep: decode spec: %v", err))
	}
	return c
}

// ReadSpecFile reads a sweep spec file (JSON, as `edl sweep submit` takes
// it; an unknown field is an error) with its defaults filled in. It does
// not validate it.
func ReadSpecFile(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", path, err)
	}
	return s.WithDefaults(), nil
}
