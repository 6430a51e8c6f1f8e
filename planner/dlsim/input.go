package dlsim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/internal/csvhead"
	"github.com/edl-nomad/edl/planner"
)

// Job is one deadline job of a trace.
type Job struct {
	ID string
	// Submit and Deadline are seconds on the trace's clock.
	Submit, Deadline float64
	// Work is the job's iterations (samples for edl traces).
	Work float64
	// GPUs is what the job asked for: the static baselines' size.
	GPUs int
	// Speed is iterations/s by GPU count, at the sizes the job can run at.
	Speed map[int]float64
	// BestEffort jobs are admitted whatever their deadline.
	BestEffort bool
}

// Sizes are the GPU counts the job can run at, ascending.
func (j Job) Sizes() []int {
	ks := make([]int, 0, len(j.Speed))
	for k := range j.Speed {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Rate is the job's speed at n GPUs: the table where it has n, else the
// straight line between the sizes around n; beyond the largest size the
// speed at the largest (more GPUs do not help); 0 below the smallest.
func (j Job) Rate(n int) float64 {
	if r, ok := j.Speed[n]; ok {
		return r
	}
	ks := j.Sizes()
	i, _ := slices.BinarySearch(ks, n)
	switch {
	case i == 0 || n <= 0:
		return 0
	case i == len(ks):
		return j.Speed[ks[len(ks)-1]]
	}
	a, b := ks[i-1], ks[i]
	return j.Speed[a] + (j.Speed[b]-j.Speed[a])*float64(n-a)/float64(b-a)
}

// Tables is ElasticFlow's throughput data: model -> global batch size ->
// GPUs -> iterations/s.
type Tables map[string]map[int]map[int]float64

// ReadTables reads every *.csv of dir in fsys: one file per model (its
// name), columns global_batch_size then one per GPU count; nan, empty or
// non-positive cells are sizes the model cannot run at.
func ReadTables(fsys fs.FS, dir string) (Tables, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read throughputs: %w", err)
	}
	t := Tables{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".csv") {
			continue
		}
		f, err := fsys.Open(path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read throughputs: %w", err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read throughputs %s: %w", e.Name(), err)
		}
		if len(recs) < 2 || len(recs[0]) < 2 || strings.TrimSpace(recs[0][0]) != "global_batch_size" {
			return nil, fmt.Errorf("read throughputs %s: want a header global_batch_size,1,2,... and rows", e.Name())
		}
		sizes := make([]int, len(recs[0]))
		for i, h := range recs[0][1:] {
			if sizes[i+1], err = strconv.Atoi(strings.TrimSpace(h)); err != nil || sizes[i+1] < 1 {
				return nil, fmt.Errorf("read throughputs %s: column %q: not a GPU count", e.Name(), h)
			}
		}
		m := map[int]map[int]float64{}
		for line, rec := range recs[1:] {
			bs, err := strconv.Atoi(strings.TrimSpace(rec[0]))
			if err != nil {
				return nil, fmt.Errorf("read throughputs %s line %d: batch size %q", e.Name(), line+2, rec[0])
			}
			row := map[int]float64{}
			for i := 1; i < len(rec) && i < len(sizes); i++ {
				v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
				if err != nil || !(v > 0) || math.IsInf(v, 0) {
					continue
				}
				row[sizes[i]] = v
			}
			m[bs] = row
		}
		t[strings.TrimSuffix(e.Name(), ".csv")] = m
	}
	if len(t) == 0 {
		if dir == "." {
			return nil, errors.New("read throughputs: no *.csv in the folder")
		}
		return nil, fmt.Errorf("read throughputs: no *.csv in %s", dir)
	}
	return t, nil
}

// ReadElasticFlow reads ElasticFlow's trace CSV (job_id, submit_time,
// iteration, model_name, ddl, batch_size, num_gpu[, duration][,
// best_effort]) and looks each job's speed up in the tables. Jobs come back
// in submission order.
func ReadElasticFlow(r io.Reader, t Tables) ([]Job, error) {
	cr, err := csvhead.NewReader(r, "trace", "job_id", "submit_time", "iteration", "model_name", "ddl", "batch_size", "num_gpu")
	if err != nil {
		return nil, err
	}
	col := cr.Col
	num := func(rec []string, c string, line int) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[col[c]]), 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("read trace line %d: %s %q: not a finite non-negative number", line, c, rec[col[c]])
		}
		return v, nil
	}
	var out []Job
	for line, rec := range cr.Rows() {
		j := Job{ID: rec[col["job_id"]]}
		if err := cr.Unique("job_id", j.ID, line); err != nil {
			return nil, err
		}
		var bs, gpus float64
		for _, f := range []struct {
			c string
			v *float64
		}{{"submit_time", &j.Submit}, {"ddl", &j.Deadline}, {"iteration", &j.Work}, {"batch_size", &bs}, {"num_gpu", &gpus}} {
			if *f.v, err = num(rec, f.c, line); err != nil {
				return nil, err
			}
		}
		j.GPUs = int(min(gpus, 1<<20))
		if j.Deadline < j.Submit {
			return nil, fmt.Errorf("read trace line %d: job %s: ddl %g before submit_time %g", line, j.ID, j.Deadline, j.Submit)
		}
		if c, ok := col["best_effort"]; ok && strings.TrimSpace(rec[c]) == "1" {
			j.BestEffort = true
		}
		model := rec[col["model_name"]]
		j.Speed = t[model][int(bs)]
		if len(j.Speed) == 0 {
			return nil, fmt.Errorf("read trace line %d: no throughputs for model %s, batch size %d", line, model, int(bs))
		}
		if j.Work <= 0 {
			return nil, fmt.Errorf("read trace line %d: job %s: iteration %g: want a positive number of iterations", line, j.ID, j.Work)
		}
		if j.GPUs < 1 || j.Speed[j.GPUs] <= 0 {
			var sizes []string
			for _, n := range slices.Sorted(maps.Keys(j.Speed)) {
				sizes = append(sizes, strconv.Itoa(n))
			}
			return nil, fmt.Errorf("read trace line %d: job %s: num_gpu %d: not a size of its throughput table (%s)", line, j.ID, j.GPUs, strings.Join(sizes, ", "))
		}
		out = append(out, j)
	}
	return csvhead.SortedJobs(cr, out, func(j Job) (float64, string) { return j.Submit, j.ID })
}

// DeadlineDraw is how deadlines are drawn for a trace that has none, as
// ElasticFlow's generator draws them: deadline = submit + U(Min, Max) x the
// job's duration at its requested GPUs, from a generator seeded with Seed.
type DeadlineDraw struct {
	Min, Max float64
	Seed     uint64
}

// FromEDLTrace makes deadline jobs of edl's trace rows (planner/sim
// format: submit, GPUs, duration): their speed follows planner's scaling
// model with a communication ratio drawn from the job's ID (log-uniform in
// [0.005, 0.05], as planner/sim draws it) at power-of-two sizes up to
// maxFactor x the request, their work is the duration at the request.
func FromEDLTrace(rows []EDLRow, d DeadlineDraw, maxFactor float64) []Job {
	rng := rand.New(rand.NewPCG(d.Seed, 0x646561646c696e65))
	out := make([]Job, 0, len(rows))
	for _, r := range rows {
		h := fnv.New64a()
		h.Write([]byte(r.ID))
		u := float64(h.Sum64()>>11) / float64(1<<53)
		k := 0.005 * math.Pow(10, u)
		m := planner.ScalingModel{Alpha: 1, Beta: k}
		j := Job{ID: r.ID, Submit: r.Submit, GPUs: r.GPUs, Speed: map[int]float64{}, BestEffort: r.BestEffort}
		top := max(r.GPUs, int(maxFactor*float64(r.GPUs)))
		for n := 1; n <= top; n *= 2 {
			j.Speed[n] = m.Throughput(n)
		}
		j.Speed[r.GPUs] = m.Throughput(r.GPUs)
		j.Work = r.Duration * m.Throughput(r.GPUs)
		j.Deadline = r.Submit + (d.Min+(d.Max-d.Min)*rng.Float64())*r.Duration
		out = append(out, j)
	}
	return out
}

// EDLRow is one row of an edl trace, as planner/sim reads it.
type EDLRow struct {
	ID         string
	Submit     float64
	GPUs       int
	Duration   float64
	BestEffort bool
}
