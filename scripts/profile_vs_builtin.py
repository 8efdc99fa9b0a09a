#!/usr/bin/env python3
"""Measured kernel times of a calibration profile (kernels_measured) against a built-in profile's
predictions, per op kind, as a Markdown table for docs/calibration.md.

The prediction uses the formulas of sim/exec/compute_model.h with the built-in profile's constants:
GEMM  overhead + 2·m·n·k·batch / (peak · e · Π d/(d + d0));  attention  flops / (peak · e_attn);
memory-bound  overhead + bytes / (HBM · e_mem).

usage: profile_vs_builtin.py MEASURED.json BUILTIN.json PEAK_FLOPS HBM_BPS
"""
import json
import statistics
import sys
from collections import defaultdict

measured, builtin = (json.load(open(p)) for p in sys.argv[1:3])
peak, hbm = float(sys.argv[3]), float(sys.argv[4])
c = builtin["compute"]


def predict(s):
    m, n, k, b = (s["shape"][x] for x in ("m", "n", "k", "batch"))
    if s["op"] == "gemm":
        d0 = c["gemm_half_dim"]
        eff = c["gemm_peak_efficiency"] * (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0))
        return c["kernel_overhead_s"] + 2 * m * n * k * b / (peak * eff)
    if s["op"] == "attention_fwd":
        return c["kernel_overhead_s"] + s["flops"] / (peak * c["attention_fwd_efficiency"])
    if s["op"] == "attention_bwd":
        return c["kernel_overhead_s"] + s["flops"] / (peak * c["attention_bwd_efficiency"])
    return c["kernel_overhead_s"] + s["bytes"] / (hbm * c["memory_bw_efficiency"])


rows = defaultdict(list)
for s in measured["kernels_measured"]:
    rows[s["op"]].append((s["median_s"], predict(s)))
print("| op kind | samples | measured total (ms) | predicted total (ms) | median relative error |")
print("|---|---|---|---|---|")
for op in sorted(rows):
    r = rows[op]
    tm, tp = sum(x for x, _ in r), sum(y for _, y in r)
    err = statistics.median(y / x - 1 for x, y in r)
    print(f"| {op} | {len(r)} | {tm * 1e3:.3f} | {tp * 1e3:.3f} | {err * 100:+.1f} % |")
gemms = [s for s in measured["kernels_measured"] if s["op"] == "gemm" and s["median_s"] > 0]
best = max(gemms, key=lambda s: s["flops"] / s["median_s"])
sh = best["shape"]
print()
print(f"Best measured GEMM: {best['flops'] / best['median_s'] / 1e12:.1f} TFLOP/s "
      f"({best['dtype']}, m={sh['m']:.0f} n={sh['n']:.0f} k={sh['k']:.0f}), "
      f"{best['flops'] / best['median_s'] / peak * 100:.1f} % of the {peak / 1e12:.0f} TFLOP/s datasheet peak.")
