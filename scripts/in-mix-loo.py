#!/usr/bin/env python3
"""Leave-one-configuration-out check of calibration in the mix (docs/calibration.md).

For each configuration of a GPU record directory (docs/validation/<record>/[fused/]<config>/real.json,
with <config>-run.log holding the exact `trainsim run` command of its simulation), build a profile
from the record's burst profile plus the execute records of the *other* configurations
(`trainsim calibrate from-execute`), simulate the held-out configuration with it, and compare with
its own execute record (`trainsim compare`). The held-out configuration's own times never reach
its profile.

Usage (repository root):
  python3 scripts/in-mix-loo.py --trainsim ./build/default/cli/trainsim \\
      --record docs/validation/h200-2026-12-04 [--runs fused] [--profile profile-h200.json]

Prints a markdown table: per configuration the iteration-time error with the burst profile (as
recorded) and with the held-out in-mix profile, and the per-class errors of the latter.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

CONFIGS = ["175b-layers", "gpt-1.3b", "llama-gqa", "llama-8k"]
GEMMS = ("qkv", "attn_proj", "mlp_up", "mlp_down", "mlp_gate", "logits", "attn_scores",
         "attn_context")


def op_class(name):
    op = name.split(" ")[0]
    if op in GEMMS:
        return "GEMM"
    if op == "attention":
        return "attention"
    if op == "cross_entropy":
        return "cross-entropy"
    if op == "optimizer":
        return "optimizer"
    return "other"


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def sim_command(log_path, trainsim, profile, out_json, extra_sets=()):
    with open(log_path) as f:
        first = f.readline().strip()
    if not first.startswith("$ "):
        sys.exit(f"{log_path}: the first line is not the command")
    args = shlex.split(first[2:])
    args[0] = trainsim
    fixed = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-o":
            fixed += ["-o", out_json]
            i += 2
            continue
        if a.startswith("calibration.profile="):
            a = "calibration.profile=" + profile
        fixed.append(a)
        i += 1
    for kv in extra_sets:
        fixed += ["--set", kv]
    return fixed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trainsim", default="./build/default/cli/trainsim")
    ap.add_argument("--record", required=True, help="GPU record directory")
    ap.add_argument("--runs", default="", help="subdirectory of the record with the runs")
    ap.add_argument("--profile", default="profile-h200.json", help="burst profile in the record")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario key added to each held-out simulation (repeatable), e.g. "
                         "framework.cross_entropy=te: the loss the executor runs")
    a = ap.parse_args()
    runs = os.path.join(a.record, a.runs) if a.runs else a.record
    base = os.path.join(a.record, a.profile)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for held in CONFIGS:
            others = [os.path.join(runs, c, "real.json") for c in CONFIGS if c != held]
            prof = os.path.join(tmp, f"loo-{held}.json")
            run([a.trainsim, "calibrate", "from-execute", *others, "--base", base, "--out", prof])
            sim = os.path.join(tmp, f"sim-{held}.json")
            run(sim_command(os.path.join(runs, f"{held}-run.log"), a.trainsim, prof, sim, a.set))
            cmp_json = os.path.join(tmp, f"compare-{held}.json")
            run([a.trainsim, "compare", sim, os.path.join(runs, held, "real.json"), "--format",
                 "json", "--out", cmp_json])
            with open(cmp_json) as f:
                new = json.load(f)
            with open(os.path.join(runs, held, "compare.json")) as f:
                old = json.load(f)
            classes = {}
            for k in new["op_kinds"]:
                s, r = classes.get(op_class(k["name"]), (0.0, 0.0))
                classes[op_class(k["name"])] = (s + k["sim_s"], r + k["real_s"])
            it = new["iteration_time"]
            ce_s, ce_r = classes.get("cross-entropy", (0.0, 0.0))
            # The same iteration with the simulated cross-entropy replaced by the measured one
            # (one GPU: every op is on the critical path).
            without_ce = (it["sim_s"] - ce_s + ce_r) / it["real_s"] - 1
            rows.append((held, old["iteration_time"]["error"], it["error"], without_ce, classes))
    names = ["GEMM", "attention", "cross-entropy", "optimizer", "other"]
    print("| configuration | burst profile | in-mix, held out | the same, cross-entropy as "
          "measured | " + " | ".join(names) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(names))
    for held, old, new, without_ce, classes in rows:
        cells = []
        for n in names:
            s, r = classes.get(n, (0.0, 0.0))
            cells.append(f"{100 * (s / r - 1):+.1f} %" if r > 0 else "–")
        print(f"| {held} | {100 * old:+.1f} % | {100 * new:+.1f} % | {100 * without_ce:+.1f} % | " +
              " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
