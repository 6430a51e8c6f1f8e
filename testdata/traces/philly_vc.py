#!/usr/bin/env python3
"""Cut one virtual cluster (VC) out of petuum/adaptdl's Philly trace.

Usage: philly_vc.py PHILLY_CSV VC [FIRST_DAY DAYS] > philly_vc_VC.csv

PHILLY_CSV is simulator/traces/philly.csv of petuum/adaptdl, branch
osdi21-artifact (columns timestamp,duration,num_gpus,gpu_time,cluster). The
job ID is the row's index in that file. With FIRST_DAY (YYYY-MM-DD) and DAYS
only the jobs submitted in [FIRST_DAY, FIRST_DAY + DAYS) are kept. It also
prints, on stderr, the natural cluster size (see README.md).
"""
import csv
import datetime
import sys


def main():
    path, vc = sys.argv[1], sys.argv[2]
    lo = hi = None
    if len(sys.argv) > 3:
        lo = datetime.datetime.strptime(sys.argv[3], "%Y-%m-%d")
        hi = lo + datetime.timedelta(days=int(sys.argv[4]))
    rows = []
    with open(path, newline="") as f:
        for i, r in enumerate(csv.DictReader(f)):
            if r["cluster"] != vc:
                continue
            t = datetime.datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S")
            if lo is not None and not (lo <= t < hi):
                continue
            rows.append((t, i, r))
    rows.sort(key=lambda x: (x[0], x[1]))
    t0 = rows[0][0]
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["job_id", "submit_time", "submit_s", "num_gpus", "duration_s", "gpu_time_s", "vc"])
    gpu_time, biggest = 0.0, 0
    for t, i, r in rows:
        d, g = int(float(r["duration"])), int(r["num_gpus"])
        w.writerow([f"philly-{i:05d}", r["timestamp"], int((t - t0).total_seconds()), g, d, d * g, vc])
        gpu_time += d * g
        biggest = max(biggest, g)
    span = (rows[-1][0] - t0).total_seconds()
    demand = gpu_time / span
    size = 8
    while size < max(biggest, demand):
        size *= 2
    print(f"{vc}: {len(rows)} jobs, largest request {biggest}, mean demand {demand:.1f} GPUs "
          f"over {span / 86400:.1f} days: natural size {size}", file=sys.stderr)


if __name__ == "__main__":
    main()
