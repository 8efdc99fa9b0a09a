#!/usr/bin/env python3
"""Summarise a GPU record made by scripts/gpu-record.sh (issue 19's checks) as Markdown.

    python3 scripts/gpu-record-summary.py docs/validation/h200-2026-12-04

Reads the record's measured profile (profile-h200.json: every kernel `calibrate kernels` timed,
with its shape, bytes or FLOPs and median time), its kernel test results and the four
configurations' `compare --format json` outputs, and prints:
  - the copy-bandwidth roofline: the copy kernel's bytes (read + written) per second at >= 64 MB;
  - each memory-bound kernel kind, forward and backward, at >= 64 MB: its bandwidth and the
    fraction of the copy bandwidth (the issue's bar: >= 0.85);
  - fused attention at sequence >= 4K, head dim 128: TFLOP/s and the fraction of the dense bf16
    tensor peak (bar: forward >= 0.50, backward >= 0.35). FLOPs: forward 4·bh·sq·sk·d (two
    GEMMs, no causal mask in these samples), backward 2.5x forward (five GEMMs, the
    FlashAttention-2 paper's convention; the profile's own `flops` field holds the simulator's
    2x, which the script converts);
  - per configuration: iteration time and peak memory, simulated vs measured, and the op-kind
    weighted absolute error (bars: +-5 % each).
Exit status 0 when it could read the record (whether or not the bars are met).
"""
import json
import os
import sys

# Dense bf16 tensor-core peak of an H100/H200 SXM: 989.4 TFLOP/s (NVIDIA H100/H200 datasheets:
# 1,979 TFLOP/s with 2:4 sparsity, half of it dense); the GPU preset h200-sxm uses the same.
DENSE_BF16_PEAK = 989.4e12
MIN_BYTES = 64 * 2**20


def load(path):
    with open(path) as f:
        return json.load(f)


def pct(x):
    return "—" if x is None else f"{100 * x:+.1f} %"


def main(rec):
    out = []
    prof_path = os.path.join(rec, "profile-h200.json")
    prof = load(prof_path)
    samples = prof.get("kernels_measured", [])
    pv = prof.get("kernels_measured_provenance", {})
    out.append(f"GPU: {pv.get('gpu_name', '?')}, CUDA {pv.get('cuda_version', '?')}, "
               f"driver {pv.get('driver_version', '?')}\n")

    copies = [s for s in samples if s["op"] == "copy" and s["bytes"] >= MIN_BYTES]
    copy_bw = max((s["bytes"] / s["median_s"] for s in copies), default=None)
    out.append("## Memory-bound kernels at >= 64 MB\n")
    if copy_bw is None:
        out.append("no copy samples of >= 64 MB in the profile: no roofline\n")
    else:
        out.append(f"copy roofline: {copy_bw / 1e12:.3f} TB/s (bytes read + written), "
                   f"{len(copies)} sizes\n")
        out.append("| kernel | samples | best GB/s | fraction of copy | >= 0.85 |")
        out.append("|---|---:|---:|---:|:---:|")
        kinds = sorted({s["op"] for s in samples if s["op"] not in
                        ("gemm", "attention_fwd", "attention_bwd", "copy")})
        for k in kinds:
            big = [s for s in samples if s["op"] == k and s["bytes"] >= MIN_BYTES]
            if not big:
                out.append(f"| {k} | 0 | — | — | no sample |")
                continue
            bw = max(s["bytes"] / s["median_s"] for s in big)
            frac = bw / copy_bw
            out.append(f"| {k} | {len(big)} | {bw / 1e9:,.0f} | {frac:.3f} | "
                       f"{'yes' if frac >= 0.85 else 'NO'} |")
        out.append("")

    out.append("## Fused attention, sequence >= 4,096, head dim 128\n")
    out.append("| pass | bh | seq | implementation | TFLOP/s | of dense bf16 peak | bar |")
    out.append("|---|---:|---:|---|---:|---:|:---:|")
    any_att = False
    for s in samples:
        if s["op"] not in ("attention_fwd", "attention_bwd"):
            continue
        sh = s["shape"]
        if sh["m"] < 4096 or sh["k"] != 128:
            continue
        any_att = True
        fwd = 4.0 * sh["batch"] * sh["m"] * sh["n"] * sh["k"]
        flops = fwd if s["op"] == "attention_fwd" else 2.5 * fwd
        # Samples of model ops are causal (half the scores): count what the kernel must do.
        # (calibrate appends the implementation that ran: "grid [cudnn-sdpa]")
        if not s["label"].startswith("grid"):
            flops /= 2
        rate = flops / s["median_s"]
        bar = 0.50 if s["op"] == "attention_fwd" else 0.35
        impl = s["label"][s["label"].find("[") + 1:-1] if "[" in s["label"] else "?"
        out.append(f"| {s['op'][10:]} ({s['label'].split(' ')[0]}) | {sh['batch']:.0f} | {sh['m']:.0f} | {impl} | "
                   f"{rate / 1e12:.0f} | {rate / DENSE_BF16_PEAK:.3f} | "
                   f"{'yes' if rate / DENSE_BF16_PEAK >= bar else 'NO'} (>= {bar}) |")
    if not any_att:
        out.append("| — | | | no sample at seq >= 4K, d 128 | | | |")
    out.append("")

    out.append("## Simulated (measured profile) vs executed, one GPU\n")
    out.append("| configuration | sim s | real s | time error | sim peak GiB | real peak GiB | "
               "memory error | op-kind weighted error |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in ("175b-layers", "gpt-1.3b", "llama-gqa", "llama-8k"):
        p = os.path.join(rec, name, "compare.json")
        if not os.path.exists(p):
            out.append(f"| {name} | | | no compare.json | | | | |")
            continue
        c = load(p)
        it = c["iteration_time"]
        mem = c.get("peak_memory")
        w = c["summary"].get("op_kind_weighted_abs_error")
        out.append(
            f"| {name} | {it['sim_s']:.4f} | {it['real_s']:.4f} | {pct(it['error'])} | "
            + (f"{mem['sim_bytes'] / 2**30:.2f} | {mem['real_bytes'] / 2**30:.2f} | "
               f"{pct(mem['error'])}" if mem else "— | — | —")
            + f" | {'—' if w is None else f'{100 * w:.1f} %'} |")
    out.append("")

    tests = os.path.join(rec, "kernels_gpu_tests.json")
    if os.path.exists(tests):
        t = load(tests)
        out.append(f"kernel tests: {t.get('tests', 0) - t.get('failures', 0) - t.get('disabled', 0)}"
                   f" of {t.get('tests', 0)} passed, {t.get('failures', 0)} failed")
        for suite in t.get("testsuites", []):
            for case in suite.get("testsuite", []):
                if case.get("failures"):
                    out.append(f"  FAILED {suite['name']}.{case['name']}")
                elif case.get("result") == "SKIPPED":
                    out.append(f"  skipped {suite['name']}.{case['name']}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
