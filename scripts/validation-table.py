#!/usr/bin/env python3
"""Prints the docs/validation.md result table from a validation CSV, running
`trainsim validate` at analytic and schedule fidelity and with --cross-validate source.

    python3 scripts/validation-table.py [CSV] [--trainsim PATH]

Run from the repository root. The framework and vpp columns come from the CSV (a blank vpp is
not interleaved; `auto` is shown with what validate searched); every number comes from the
three runs.
"""
import csv
import json
import subprocess
import sys


def run(trainsim, runs, *extra):
    out = subprocess.run([trainsim, "validate", runs, "--format", "json", *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    args = sys.argv[1:]
    trainsim = "./build/default/cli/trainsim"
    if "--trainsim" in args:
        i = args.index("--trainsim")
        trainsim = args[i + 1]
        del args[i:i + 2]
    runs = args[0] if args else "scenarios/validation/published-runs.csv"
    with open(runs, newline="") as f:
        cells = {row["id"]: row for row in csv.DictReader(f)}
    analytic = run(trainsim, runs)
    schedule = run(trainsim, runs, "--fidelity", "schedule")
    crossval = run(trainsim, runs, "--cross-validate", "source")
    print("| | median abs. MFU error (pts) | max (pts) | iteration MAPE |")
    print("|---|---|---|---|")
    for name, j in (("analytic", analytic), ("schedule", schedule),
                    ("leave-one-source-out (analytic)", crossval)):
        s = j["summary"]
        print(f"| {name} | {s['median_abs_mfu_err_pts']:.1f} | {s['max_abs_mfu_err_pts']:.1f} | "
              f"{s['iter_time_mape']:.1f} % |")  # the JSON's MAPE is in percent
    print()
    print("| id | framework | vpp | mbs | iter pred (s) | iter pub (s) | MFU pred | MFU pub | "
          "err analytic (pts) | err schedule (pts) | err cross-validated (pts) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    by_id = lambda j: {r["id"]: r for r in j["rows"]}
    sch, cv = by_id(schedule), by_id(crossval)
    for r in analytic["rows"]:
        rid = r["id"]
        cell = cells.get(rid, {})
        vpp = cell.get("vpp", "")
        if vpp.lower() == "auto":
            vpp = r.get("assumed", {}).get("vpp", "?").split(" ")[0] + " (searched)"
        elif not vpp:
            vpp = "1 (blank)"
        mbs = cell.get("mbs", "")
        if not mbs:
            mbs = r.get("assumed", {}).get("mbs", "?").split(" ")[0] + " (searched)"
        fw = cell.get("framework", "")
        pub_iter = r["published"]["iter_s"]
        star = "*" if any(d.startswith("iter_s") for d in r.get("published_derived", [])) else ""
        err = lambda x: f"{x['error']['mfu_pts']:+.1f}" if x and x["error"].get("mfu_pts") is not None else "–"
        print(f"| {rid} | {fw} | {vpp} | {mbs} | {r['predicted']['iter_s']:.2f} | {pub_iter:.2f}{star} | "
              f"{r['predicted']['mfu']:.3f} | {r['published']['mfu']:.3f} | {err(r)} | "
              f"{err(sch.get(rid))} | {err(cv.get(rid))} |")


if __name__ == "__main__":
    main()
