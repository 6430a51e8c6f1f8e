package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edl-nomad/edl/planner/sim"
)

// sweepOpts are the flags of `edl sim --sweep`.
type sweepOpts struct {
	on       bool
	manifest *string
	sizes    *string
	set      *string
	vcs      *string
	parallel *int
	reuse    *string
	from     *string
}

func sweepFlags(fs *flag.FlagSet) *sweepOpts {
	o := &sweepOpts{}
	fs.BoolVar(&o.on, "sweep", false, "run every workload of --manifest at --sizes times its natural size and at --loads (default 0.5,1,2,4): elastic against tiresias and fifo, one row per point and a summary (worst, median)")
	o.manifest = fs.String("manifest", "testdata/traces/sweep.csv", "--sweep: CSV of workloads (vc, trace, gpus, set, window); traces are relative to it")
	o.sizes = fs.String("sizes", "0.5,1,2", "--sweep: cluster sizes, as factors of each workload's natural size")
	o.set = fs.String("set", "", "--sweep: only the workloads of this set (tune or heldout)")
	o.vcs = fs.String("vcs", "", "--sweep: only these comma-separated workloads (vc column)")
	o.parallel = fs.Int("parallel", 1, "--sweep: simulations run at once")
	o.reuse = fs.String("reuse", "", "--sweep: a file of an earlier --sweep --json; its fifo and tiresias figures are reused where workload, size and load match (the baselines do not depend on the elastic policy)")
	o.from = fs.String("from", "", "--sweep: print (and --plot) the points of an earlier --sweep --json instead of running anything")
	return o
}

func runSweep(ctx context.Context, sw *sweepOpts, base sim.Options, loads []float64, asJSON, markdown bool, plotTo string, stdout io.Writer) error {
	sizes, err := parseLoads(*sw.sizes)
	if err != nil {
		return usageErrorf("sim: --sizes: %v", err)
	}
	if *sw.parallel < 1 {
		return usageErrorf("sim: --parallel %d: must be positive", *sw.parallel)
	}
	var only []string
	if *sw.vcs != "" {
		only = strings.Split(*sw.vcs, ",")
	}
	skip := func(vc, set string) bool {
		return (*sw.set != "" && set != *sw.set) || (only != nil && !slices.Contains(only, vc))
	}
	if *sw.from != "" {
		points, err := readSweepPoints(*sw.from)
		if err != nil {
			return fmt.Errorf("sim: --from: %w", err)
		}
		points = slices.DeleteFunc(points, func(p sim.SweepPoint) bool { return skip(p.VC, p.Set) })
		if len(points) == 0 {
			return usageErrorf("sim: --from %s: no point matches --set %q --vcs %q", *sw.from, *sw.set, *sw.vcs)
		}
		return writeSweep(points, asJSON, markdown, plotTo, stdout)
	}
	mf, err := os.Open(*sw.manifest)
	if err != nil {
		return usageErrorf("sim: --manifest: %v", err)
	}
	cases, err := sim.ReadSweepManifest(mf)
	mf.Close()
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	cases = slices.DeleteFunc(cases, func(c sim.SweepCase) bool { return skip(c.VC, c.Set()) })
	if len(cases) == 0 {
		return usageErrorf("sim: --sweep: no workload of %s matches --set %q --vcs %q", *sw.manifest, *sw.set, *sw.vcs)
	}
	traces := map[string][]sim.TraceJob{}
	for _, c := range cases {
		f, err := os.Open(filepath.Join(filepath.Dir(*sw.manifest), c.Trace))
		if err != nil {
			return fmt.Errorf("sim: --sweep %s: %w", c.VC, err)
		}
		tr, err := sim.ReadTrace(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("sim: --sweep %s: %w", c.VC, err)
		}
		traces[c.Trace] = tr
	}
	so := sim.SweepOptions{Base: base, Sizes: sizes, Loads: loads, Parallel: *sw.parallel}
	if *sw.reuse != "" {
		if so.Reuse, err = readSweepPoints(*sw.reuse); err != nil {
			return fmt.Errorf("sim: --reuse: %w", err)
		}
	}
	points, err := sim.Sweep(ctx, cases, traces, so)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return writeSweep(points, asJSON, markdown, plotTo, stdout)
}

// writeSweep prints the points (a table or JSON lines, then the
// summaries) and draws the plot.
func writeSweep(points []sim.SweepPoint, asJSON, markdown bool, plotTo string, stdout io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, p := range points {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		for _, s := range sim.SweepSets(points) {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
	} else if err := sim.WriteSweepTable(stdout, points, markdown); err != nil {
		return err
	}
	if plotTo != "" {
		out, err := os.Create(plotTo)
		if err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
		if err := sim.WriteSweepPlot(out, "elastic / tiresias average JCT, Philly VCs", points); err != nil {
			out.Close()
			return fmt.Errorf("sim: %w", err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
	}
	return nil
}

// readSweepPoints reads the point lines of an earlier --sweep --json.
func readSweepPoints(path string) ([]sim.SweepPoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []sim.SweepPoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !json.Valid(line) || strings.Contains(string(line), `"summary"`) {
			continue
		}
		var p sim.SweepPoint
		if err := json.Unmarshal(line, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if p.VC != "" {
			out = append(out, p)
		}
	}
	return out, sc.Err()
}
