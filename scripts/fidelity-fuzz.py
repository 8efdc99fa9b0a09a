#!/usr/bin/env python3
"""Analytic against schedule fidelity on random configurations of the shipped examples.

Draws `count` configurations (seeded) over TP, PP, ZeRO, recompute, micro-batch, the DP and TP
overlap switches, the TP overlap method and its SMs, runs each that the scenario accepts at both
fidelities, and prints how far their MFUs differ (points): the count run, the median, the share
within 1 point, and the worst eight with their --set keys. With --moe every draw is a mixture of
experts (8 experts, top 2, on every layer or every second one) and the draws also cover context
and expert parallelism and two virtual stages; most such draws are refused (memory, layouts),
so give it a larger COUNT.

Usage (from the repository root): python3 scripts/fidelity-fuzz.py [SEED] [COUNT] [TRAINSIM] [--moe]
"""
import json
import random
import statistics
import subprocess
import sys

SCENARIOS = [
    "scenarios/examples/llama3-8b-64xh100.yaml",
    "scenarios/examples/megatron-1.7b-32xa100.yaml",
    "scenarios/examples/torchtitan-llama2-70b-64xa100.yaml",
    "scenarios/examples/llama3-70b-fp8-64xh100.yaml",
]
CHOICES = {
    "parallel.tp": ["1", "2", "4", "8"],
    "parallel.pp": ["1", "2", "4"],
    "parallel.zero": ["0", "1", "2", "3"],
    "training.recompute": ["none", "selective", "full"],
    "optimizations.dp_overlap": ["true", "false"],
    "optimizations.tp_overlap": ["true", "false"],
    "framework.tp_overlap_method": ["decomposed", "bulk"],
    "framework.tp_overlap_sms": ["0", "16"],
    "training.micro_batch": ["1", "2"],
}
MOE_CHOICES = {
    "parallel.cp": ["1", "2", "4"],
    "parallel.ep": ["1", "2", "4", "8"],
    "parallel.vpp": ["1", "2"],
    "model.moe_every": ["1", "2"],
}


def mfu(binary, scenario, fidelity, sets):
    args = [binary, "run", scenario, "--fidelity", fidelity, "--format", "json"]
    for s in sets:
        args += ["--set", s]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return None  # refused (memory, an impossible layout): not a configuration to compare
    return json.loads(p.stdout)["mfu"]


def main():
    moe = "--moe" in sys.argv
    argv = [a for a in sys.argv if a != "--moe"]
    seed = int(argv[1]) if len(argv) > 1 else 7
    count = int(argv[2]) if len(argv) > 2 else 100
    binary = argv[3] if len(argv) > 3 else "./build/release/cli/trainsim"
    choices = dict(CHOICES, **MOE_CHOICES) if moe else CHOICES
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        scenario = rng.choice(SCENARIOS)
        sets = ["parallel.dp=auto"] + (["model.experts=8", "model.top_k=2"] if moe
                                       else ["parallel.vpp=1"])
        for key, values in choices.items():
            if rng.random() < 0.6:
                sets.append(f"{key}={rng.choice(values)}")
        if "optimizations.tp_overlap=true" in sets:
            sets.append("parallel.sp=true")
        a = mfu(binary, scenario, "analytic", sets)
        s = mfu(binary, scenario, "schedule", sets) if a is not None else None
        if a is None or s is None:
            continue
        d = (a - s) * 100
        rows.append((abs(d), d, scenario.split("/")[-1], " ".join(sets)))
    if not rows:
        print("no configuration ran")
        return 1
    rows.sort(reverse=True)
    within = sum(1 for r in rows if r[0] <= 1.0) / len(rows)
    print(f"configurations {len(rows)} of {count} drawn; median |analytic - schedule| "
          f"{statistics.median(r[0] for r in rows):.2f} points; within 1 point {within:.1%}")
    for _, d, scenario, sets in rows[:8]:
        print(f"{d:+.2f}  {scenario}  {sets}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
