package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner/dlsim"
	"github.com/edl-nomad/edl/planner/sim"
)

func runSimDeadline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const summary = "Replay deadline jobs and print the share that meets its deadline (deadline_met_ratio,\n" +
		"ElasticFlow's figure) per policy: deadline (admission control, each job at its minimum\n" +
		"satisfactory share, earliest deadline first), edf, tiresias, elastic. --format elasticflow\n" +
		"reads ElasticFlow's trace (job_id, submit_time, iteration, model_name, ddl, batch_size, num_gpu,\n" +
		"duration) and its throughput tables (--throughputs); --format edl reads edl's traces and draws\n" +
		"each job's deadline as submit + U(--min-ddl, --max-ddl) x its duration (--seed)."
	fs := newFlagSet("sim", summary, stderr)
	format := fs.String("format", "elasticflow", "trace format: elasticflow or edl")
	trace := fs.String("trace", "testdata/elasticflow/elasticVpollux_e.csv", "trace CSV file")
	tput := fs.String("throughputs", "testdata/elasticflow/throughputs_T4", "folder of ElasticFlow throughput tables (model.csv: global_batch_size,1,2,4,...; iterations/s)")
	d := dlsim.DefaultOptions(dlsim.Deadline)
	gpus := fs.Int("gpus", d.GPUs, "GPUs in the simulated cluster")
	perNode := fs.Int("gpus-per-node", d.GPUsPerNode, "GPUs per node (the tiresias and elastic policies place on nodes)")
	policy := fs.String("policy", "", "one policy: deadline, edf, tiresias or elastic (default: all four)")
	slot := fs.Float64("slot-s", 0, "decide only every this many seconds (ElasticFlow's scheduling slot; 0: at every arrival and completion)")
	anySize := fs.Bool("any-size", false, "the deadline policy may run a job at any GPU count (speed interpolated between table sizes); default: only the table's sizes")
	maxF := fs.Float64("max-factor", d.MaxFactor, "elastic policy: at most this many times the GPUs a job asked for")
	join := fs.Float64("join-cost-s", d.Costs.Join.Seconds(), "seconds a grow stalls a job (edl live mode's measured join)")
	leave := fs.Float64("leave-cost-s", d.Costs.Leave.Seconds(), "seconds a shrink stalls a job (edl live mode's measured leave)")
	start := fs.Float64("start-cost-s", d.Costs.Start.Seconds(), "seconds a job's start or resume takes (edl's submission to first step)")
	minDDL := fs.Float64("min-ddl", 0.5, "--format edl: smallest deadline factor (x the job's duration)")
	maxDDL := fs.Float64("max-ddl", 1.5, "--format edl: largest deadline factor")
	seed := fs.Uint64("seed", 1, "--format edl: seed of the deadline draw")
	asJSON := fs.Bool("json", false, "print one JSON line per policy instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var js []dlsim.Job
	f, err := os.Open(*trace)
	if err != nil {
		return usageErrorf("sim: --trace: %v", err)
	}
	defer f.Close()
	switch *format {
	case "elasticflow":
		dir, err := filepath.Abs(*tput)
		if err != nil {
			return usageErrorf("sim: --throughputs: %v", err)
		}
		if _, err := os.ReadDir(dir); err != nil { // named, not "." inside it
			return usageErrorf("sim: --throughputs: %v", err)
		}
		t, err := dlsim.ReadTables(os.DirFS(dir), ".")
		if err != nil {
			return usageErrorf("sim: --throughputs %s: %v", *tput, err)
		}
		if js, err = dlsim.ReadElasticFlow(f, t); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	case "edl":
		if !(*minDDL > 0) || *maxDDL < *minDDL {
			return usageErrorf("sim: --min-ddl %g, --max-ddl %g: want 0 < min <= max", *minDDL, *maxDDL)
		}
		rows, err := sim.ReadTrace(f)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		er := make([]dlsim.EDLRow, len(rows))
		for i, r := range rows {
			er[i] = dlsim.EDLRow{ID: r.ID, Submit: r.Submit, GPUs: r.GPUs, Duration: r.Duration, BestEffort: r.Priority == jobs.Opportunistic}
		}
		js = dlsim.FromEDLTrace(er, dlsim.DeadlineDraw{Min: *minDDL, Max: *maxDDL, Seed: *seed}, *maxF)
	default:
		return usageErrorf("sim: --format %q: want elasticflow or edl", *format)
	}
	policies := dlsim.Policies
	if *policy != "" {
		policies = []dlsim.Policy{dlsim.Policy(*policy)}
	}
	// In flag order, so that of two bad values the same one is named each time.
	var slotD, startD, joinD, leaveD time.Duration
	for _, f := range []struct {
		name string
		v    float64
		d    *time.Duration
	}{{"slot-s", *slot, &slotD}, {"start-cost-s", *start, &startD}, {"join-cost-s", *join, &joinD}, {"leave-cost-s", *leave, &leaveD}} {
		var err error
		if *f.d, err = cli.Seconds(f.name, f.v); err != nil {
			return usageErrorf("sim: %v", err)
		}
	}
	var results []dlsim.Result
	for _, p := range policies {
		o := d
		o.Policy, o.GPUs, o.GPUsPerNode, o.Slot, o.AnySize, o.MaxFactor = p, *gpus, *perNode, slotD, *anySize, *maxF
		o.Costs = dlsim.ResizeCosts{Start: startD, Join: joinD, Leave: leaveD}
		if err := o.Validate(); err != nil {
			return usageErrorf("sim: %v", err)
		}
		r, err := dlsim.Run(ctx, js, o)
		if err != nil {
			return fmt.Errorf("sim %s: %w", p, err)
		}
		results = append(results, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\tjobs\tmet\trefused\tlate\tadmitted late\tdeadline_met_ratio\tresizes\tutilisation\t\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.3f\t%d\t%.2f\t\n", r.Policy, r.Jobs, r.Met, r.Refused, r.Late, r.AdmittedLate, r.DeadlineMetRatio, r.Resizes, r.Utilisation)
	}
	return tw.Flush()
}
