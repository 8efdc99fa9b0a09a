#!/usr/bin/env bash
# Real execution check of trainsim for a machine with an NVIDIA GPU (written for one H200): run
# the same Program with `trainsim run` (simulated) and `trainsim execute` (measured on the GPU),
# then `trainsim compare` them. See docs/execute.md.
#
#   scripts/gpu-execute.sh pack [BUILD_DIR] [PACK_DIR]
#       On the build machine (CUDA and NCCL found at configure time): copy the trainsim binary
#       and the launch-plan test from BUILD_DIR (default build/default) into PACK_DIR (default
#       build/gpu-execute), debug info stripped, with the non-system, non-CUDA shared libraries
#       they load (lib/). The GPU machine must have the CUDA runtime, cuBLASLt and NCCL.
#
#   scripts/gpu-execute.sh run [PACK_DIR]
#       On the GPU machine, from the repository root. Writes everything under $OUT (default
#       out/gpu-execute): for each scenario below sim.json (run, schedule fidelity), real.json and
#       real-trace.json (execute), compare.txt / compare.md / compare.json, logs, and
#       summary.txt with one line per step. Scenarios:
#         gpt-1.3b     24 layers, hidden 2048, 16 heads, ffn 8192, seq 2048 on 1 GPU
#                      (global batch 8, micro-batch 2);
#         175b-layer   one layer of GPT-3 175B's shape (hidden 12288, 96 heads, seq 2048) with its
#                      embedding and loss, on 1 GPU (global batch 2, micro-batch 1);
#       and a TP 2 layout, which must exit 3 on a machine with one GPU (run on 2+ GPUs otherwise).
#       BACKEND=fake runs the same steps with the fake device (no GPU; for trying the script).
#       Exit status 0 when every step did what it should.
set -u -o pipefail

mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
progs=(cli/trainsim tests/kernels_test_launch_plan)

pack() {
  local build=${1:-$root/build/default} dest=${2:-$root/build/gpu-execute}
  rm -rf "$dest" && mkdir -p "$dest/lib"
  local p
  for p in "${progs[@]}"; do
    [[ -x $build/$p ]] || { echo "missing $build/$p (build it first)" >&2; return 1; }
    strip --strip-debug -o "$dest/$(basename "$p")" "$build/$p"
  done
  local lib
  ldd "$dest"/trainsim "$dest"/kernels_test_launch_plan 2>/dev/null | awk '/=> \// {print $3}' |
    sort -u | while read -r lib; do
      case $(basename "$lib") in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so*) ;;
        *) [[ $lib == /usr/local/cuda* ]] || cp -L "$lib" "$dest/lib/" ;;
      esac
    done
  du -sh "$dest"
}

run() {
  local pack_dir=${1:-$root/build/gpu-execute}
  local out=${OUT:-$root/out/gpu-execute}
  local backend=${BACKEND:-cuda}
  mkdir -p "$out"
  cd "$root" || return 1
  export LD_LIBRARY_PATH="$pack_dir/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
  local ts=$pack_dir/trainsim summary=$out/summary.txt failures=0
  : >"$summary"
  # step NAME WANT_RC TIMEOUT_S CMD...: output in $out/NAME.log, one line in summary.txt.
  step() {
    local name=$1 want=$2 limit=$3
    shift 3
    local start=$SECONDS rc verdict=ok
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    [[ $rc == "$want" ]] || { verdict=FAIL; failures=$((failures + 1)); }
    printf '%-30s %-4s rc=%-3s want=%-3s %4ss\n' "$name" "$verdict" "$rc" "$want" \
      $((SECONDS - start)) | tee -a "$summary"
  }
  {
    date -u +%FT%TZ
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
    git -C "$root" rev-parse HEAD 2>/dev/null || true
  } >"$out/machine.txt" 2>&1
  step info 0 60 "$ts" info --format json
  step launch_plan_test 0 300 "$pack_dir/kernels_test_launch_plan" \
    --gtest_output="json:$out/kernels_test_launch_plan.json"

  local base="scenarios/megascale-175b-12288.yaml --set cluster.gpu=h200-sxm --set cluster.gpus=1"
  base+=" --set parallel.tp=1 --set parallel.pp=1 --set parallel.vpp=1 --set parallel.dp=1"
  local -A scen
  scen[gpt-1.3b]="--set model.layers=24 --set model.hidden=2048 --set model.heads=16"
  scen[gpt-1.3b]+=" --set model.ffn_hidden=8192 --set model.seq_len=2048 --set model.vocab=51200"
  scen[gpt-1.3b]+=" --set training.global_batch=8 --set training.micro_batch=2"
  scen[175b-layer]="--set model.preset=gpt3-175b --set model.layers=1"
  scen[175b-layer]+=" --set training.global_batch=2 --set training.micro_batch=1"
  local name
  for name in gpt-1.3b 175b-layer; do
    local dir=$out/$name
    mkdir -p "$dir"
    # shellcheck disable=SC2086  # the scenario strings are word lists on purpose
    step "$name-run" 0 300 "$ts" run $base ${scen[$name]} --fidelity schedule --format json \
      -o "$dir/sim.json"
    # shellcheck disable=SC2086
    step "$name-execute" 0 600 "$ts" execute $base ${scen[$name]} --backend "$backend" \
      --iterations 10 --warmup 3 --timeout 300 --out "$dir/real.json" --trace "$dir/real-trace.json"
    local f
    for f in text markdown json; do
      local ext=${f/text/txt}
      ext=${ext/markdown/md}
      step "$name-compare-$f" 0 60 "$ts" compare "$dir/sim.json" "$dir/real.json" --format "$f" \
        --out "$dir/compare.$ext"
    done
  done
  # TP 2 needs two GPUs: with one the command must refuse with exit 3.
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  local tp2="scenarios/megascale-175b-12288.yaml --set cluster.gpu=h200-sxm --set cluster.gpus=2"
  tp2+=" --set parallel.tp=2 --set parallel.pp=1 --set parallel.vpp=1 --set parallel.dp=1"
  tp2+=" --set model.preset=gpt3-350m --set training.global_batch=4 --set training.micro_batch=1"
  local want=3
  [[ $backend == fake || $gpus -ge 2 ]] && want=0
  # shellcheck disable=SC2086
  step tp2-execute "$want" 300 "$ts" execute $tp2 --backend "$backend" --out "$out/tp2-real.json"
  echo "failures: $failures" | tee -a "$summary"
  [[ $failures == 0 ]]
}

case $mode in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 pack [BUILD_DIR] [PACK_DIR] | run [PACK_DIR]" >&2; exit 2 ;;
esac
