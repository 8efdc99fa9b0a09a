#!/usr/bin/env bash
# One prepared GPU session (one H200, a few minutes of device time): kernel correctness tests
# (every own kernel, forward and backward, cuDNN's fused attention, GEMMs against their CPU
# references), `calibrate kernels` for the default scenario's shapes with the standard grid, then
# four single-GPU configurations, each simulated with the measured profile (`run`), executed
# (`execute`: same Program, activations held as the memory model's inventory says, peak memory
# measured) and compared (`compare`, per op kind, time and memory), then each configuration
# predicted from the others' execute records (scripts/in-mix-loo.py). Everything lands in one
# archive under $OUT. Issue 19's record; the first record (2026-11-30) was made by its
# predecessor (git history).
#
#   here:   scripts/gpu-record.sh pack            # strip trainsim, the GPU module and the GPU test;
#                                                 # copy the non-CUDA libraries they load
#   there:  OUT=/some/dir scripts/gpu-record.sh run   # → $OUT/gpu-record.tgz
#           PROFILE=measured.json OUT=... scripts/gpu-record.sh run   # only run/execute/compare
#           OUT=/some/dir scripts/gpu-record.sh clocks  # → $OUT/gpu-clocks.tgz (the power-limit check)
#           FUSED=1 ... run                          # the configurations with fused (cuDNN) attention
#
# cuDNN: the GPU module loads libcudnn.so.9 at run time. The run step looks for it where the
# machine has it (the dynamic linker's cache, the CUDA toolkit, a Python wheel's nvidia/cudnn/lib)
# and says which it took in machine.txt; without one, attention runs on the project's own
# kernel, labelled so in the profile's samples.
set -u -o pipefail
mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
pack_dir=$root/build/gpu-record

pack() {
  local build=${BUILD:-$root/build/default}
  rm -rf "$pack_dir" && mkdir -p "$pack_dir/lib"
  strip --strip-unneeded -o "$pack_dir/trainsim" "$build/cli/trainsim"
  strip --strip-unneeded -o "$pack_dir/libtrainsim_gpu.so" "$build/cli/libtrainsim_gpu.so"
  strip --strip-unneeded -o "$pack_dir/kernels_test_kernels_gpu" "$build/tests/kernels_test_kernels_gpu"
  ldd "$pack_dir/trainsim" "$pack_dir/kernels_test_kernels_gpu" "$pack_dir/libtrainsim_gpu.so" |
    awk '/=> \// {print $3}' | sort -u |
    while read -r lib; do
      case $(basename "$lib") in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so*) ;;
        *) [[ $lib == /usr/local/cuda* ]] || cp -L "$lib" "$pack_dir/lib/" ;;
      esac
    done
  du -sh "$pack_dir"
}

# The directory of a loadable libcudnn.so.9, or nothing.
find_cudnn() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
    [[ -e $d/libcudnn.so.9 ]] && { echo "$d"; return; }
  done
  d=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' \
      2>/dev/null) && [[ -e $d/libcudnn.so.9 ]] && { echo "$d"; return; }
  d=$(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 / {print $NF; exit}')
  [[ -n $d ]] && dirname "$d"
}

# Shared by run and clocks: a scratch folder for the record ($out; $OUT receives one archive,
# $archive, as the device tool returns few files), cuDNN on the library path, the packed module.
setup() {
  out=$1 archive_name=$2 dest=${OUT:-$root/out}
  rm -rf "$out" && mkdir -p "$out" "$dest"
  cd "$root" || return 1
  cudnn=$(find_cudnn)
  export LD_LIBRARY_PATH="$pack_dir/lib:/usr/local/cuda/lib64${cudnn:+:$cudnn}:${LD_LIBRARY_PATH:-}"
  export TRAINSIM_GPU_MODULE=$pack_dir/libtrainsim_gpu.so
  ts=$pack_dir/trainsim summary=$out/summary.txt
  : >"$summary"
}

# step NAME LIMIT_S CMD...: the command's output in $out/NAME.log (first line: the command), one
# line in summary.txt with its exit code and seconds.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc
  echo "\$ $*" >"$out/$name.log"
  timeout "$limit" "$@" >>"$out/$name.log" 2>&1
  rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" $((SECONDS - start)) | tee -a "$summary"
}

# The archive is rewritten after every stage, so that a run stopped at the device's time limit
# still returns what it measured.
archive() {
  scrub
  tar czf "$dest/$archive_name" -C "$out" .
}

run() {
  setup "${WORK:-/tmp/gpu-record}" gpu-record.tgz || return 1
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv;
    git -C "$root" rev-parse HEAD 2>/dev/null || echo "(no git)";
    # (the folder itself is a path of that machine: only where it was found is written)
    case ${cudnn:-} in
      "") echo "cuDNN: none found (attention on the own kernel)" ;;
      */nvidia/cudnn/lib) echo "cuDNN: the Python wheel's nvidia/cudnn/lib" ;;
      *) echo "cuDNN: $cudnn" ;;
    esac
    (cd "${cudnn:-/nonexistent}" 2>/dev/null && ls libcudnn.so.9*);
    "$ts" --version; } >"$out/machine.txt" 2>&1
  if [[ -n ${PROFILE:-} ]]; then
    cp "$PROFILE" "$out/profile-h200.json"   # a profile measured earlier: skip to the comparisons
  else
    # (TRAINSIM_BANDWIDTH_REPORT: the kernel tests also print each memory-bound kind's bandwidth)
    step kernels_gpu_tests 100 env TRAINSIM_BANDWIDTH_REPORT=1 "$pack_dir/kernels_test_kernels_gpu" \
      --gtest_output="json:$out/kernels_gpu_tests.json"
    archive
    step calibrate 150 "$ts" calibrate kernels --scenario scenarios/megascale-175b-12288.yaml \
      --set optimizations.efficient_operators=false --repeats 10 --warmup 3 \
      --out "$out/profile-h200.json"
    archive
  fi
  local prof=$out/profile-h200.json
  # One GPU, no model parallelism; the default scenario's framework (MegaScale levers: fused
  # attention, unfused element-wise operators as the executor runs them).
  local base="scenarios/megascale-175b-12288.yaml --set cluster.gpu=h200-sxm --set cluster.gpus=1"
  base+=" --set parallel.tp=1 --set parallel.pp=1 --set parallel.vpp=1 --set parallel.dp=1"
  # The executor runs one fused loss kernel per pass (logits read once; the backward writes the
  # gradient): the simulation prices Transformer Engine's fused loss, the nearest of
  # framework.cross_entropy's implementations, not Megatron's unfused one (records before
  # 2026-12-04 simulated the unfused loss, hence their "cross-entropy as measured" column).
  base+=" --set framework.cross_entropy=te"
  # FUSED=1: the preset's own operators (fused attention: cuDNN's SDPA in execute); otherwise the
  # unfused path the 2026-11-30 record ran (attention as batched GEMMs, softmax and dropout).
  [[ ${FUSED:-0} == 1 ]] || base+=" --set optimizations.efficient_operators=false"
  local -A scen
  # A 175B-shaped layer stack: two layers of GPT-3 175B with its embedding and loss.
  scen[175b-layers]="--set model.preset=gpt3-175b --set model.layers=2"
  scen[175b-layers]+=" --set training.global_batch=2 --set training.micro_batch=1"
  # A 1.3B GPT (24 layers, hidden 2,048), micro-batch 2.
  scen[gpt-1.3b]="--set model.layers=24 --set model.hidden=2048 --set model.heads=16"
  scen[gpt-1.3b]+=" --set model.ffn_hidden=8192 --set model.seq_len=2048 --set model.vocab=51200"
  scen[gpt-1.3b]+=" --set training.global_batch=4 --set training.micro_batch=2"
  # A Llama-style block stack: Llama 3 8B's shape (GQA 32/8 heads, SwiGLU, RMSNorm), 4 layers,
  # sequence 4,096.
  scen[llama-gqa]="--set model.preset=llama3-8b --set model.layers=4 --set model.seq_len=4096"
  scen[llama-gqa]+=" --set training.global_batch=4 --set training.micro_batch=1"
  # A long sequence: the same block stack at 8,192 tokens.
  scen[llama-8k]="--set model.preset=llama3-8b --set model.layers=4 --set model.seq_len=8192"
  scen[llama-8k]+=" --set training.global_batch=2 --set training.micro_batch=1"
  local name
  for name in 175b-layers gpt-1.3b llama-gqa llama-8k; do
    local dir=$out/$name
    mkdir -p "$dir"
    step "$name-run" 30 "$ts" run $base ${scen[$name]} --set calibration.profile="$prof" \
      --fidelity schedule --format json -o "$dir/sim.json"
    step "$name-execute" 60 "$ts" execute $base ${scen[$name]} --iterations 5 --warmup 2 \
      --timeout 50 --out "$dir/real.json"
    step "$name-compare" 15 "$ts" compare "$dir/sim.json" "$dir/real.json" --format markdown \
      --out "$dir/compare.md"
    step "$name-compare-json" 15 "$ts" compare "$dir/sim.json" "$dir/real.json" --format json \
      --out "$dir/compare.json"
    archive
  done
  # Calibrated in the mix, each configuration held out: its profile from the burst profile and
  # the other three configurations' execute records (docs/calibration.md, "Calibrating in the
  # mix").
  step in-mix-loo 60 python3 scripts/in-mix-loo.py --trainsim "$ts" --record "$out"
  date -u +%FT%TZ >>"$summary"
  archive
  cat "$summary"
}

# Committed records hold no absolute path of either machine: commands and provenance strings
# name the repository root's files relative to it and the record's own files by their name.
# JSON writers escape the slashes (gtest's --gtest_output=json writes "\/work\/..."), so both
# spellings are scrubbed; scripts/check-records.sh (a ctest) checks what is committed.
scrub() {
  local esc_root esc_out
  esc_root=$(sed 's#/#\\\\/#g' <<<"$root")
  esc_out=$(sed 's#/#\\\\/#g' <<<"$out")
  grep -rlIF -e "$root/" -e "$out/" -e "${root//\//\\/}" -e "${out//\//\\/}" "$out" |
    while read -r f; do
      sed -i -e "s#$out/##g" -e "s#$root/##g" -e "s#${esc_out}\\\\/##g" \
        -e "s#${esc_root}\\\\/##g" "$f"
    done
  # cuDNN's folder (a Python wheel's, say) is that machine's path too.
  if [[ -n ${cudnn:-} ]]; then
    grep -rlIF -e "$cudnn" "$out" | while read -r f; do sed -i "s#$cudnn#(cuDNN lib folder)#g" "$f"; done
  fi
}

# A follow-up check (issue 19, the 175B stack's GEMMs ran slower executed than calibrated): the
# SM clock and power every 100 ms (nvidia-smi) while `calibrate kernels` times the stack's own
# (TP 1) shapes with 10 and with 100 repeats, and while `execute` runs it for 20 iterations; then
# `run` with each profile against that execution. → $OUT/gpu-clocks.tgz
clocks() {
  setup "${WORK:-/tmp/gpu-clocks}" gpu-clocks.tgz || return 1
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
    --format=csv -lms 100 >"$out/clocks.csv" 2>&1 &
  local smi=$!
  local sets="--set cluster.gpu=h200-sxm --set cluster.gpus=1 --set parallel.tp=1 --set parallel.pp=1"
  sets+=" --set parallel.vpp=1 --set parallel.dp=1 --set optimizations.efficient_operators=false"
  sets+=" --set model.preset=gpt3-175b --set model.layers=2 --set training.global_batch=2"
  sets+=" --set training.micro_batch=1 --set framework.cross_entropy=te"
  local sc=scenarios/megascale-175b-12288.yaml
  step calibrate-r10 90 "$ts" calibrate kernels --scenario $sc $sets --no-grid --repeats 10 \
    --warmup 3 --out "$out/profile-r10.json"
  archive
  step calibrate-r100 120 "$ts" calibrate kernels --scenario $sc $sets --no-grid --repeats 100 \
    --warmup 30 --out "$out/profile-r100.json"
  archive
  step execute-20 60 "$ts" execute $sc $sets --iterations 20 --warmup 2 --timeout 50 \
    --out "$out/real.json"
  kill "$smi" 2>/dev/null
  local r
  for r in r10 r100; do
    step "run-$r" 30 "$ts" run $sc $sets --set calibration.profile="$out/profile-$r.json" \
      --fidelity schedule --format json -o "$out/sim-$r.json"
    step "compare-$r" 15 "$ts" compare "$out/sim-$r.json" "$out/real.json" --format markdown \
      --out "$out/compare-$r.md"
  done
  archive
  cat "$summary"
}

case $mode in
  pack) pack ;;
  run) run ;;
  clocks) clocks ;;
  *) echo "usage: $0 pack | run | clocks" >&2; exit 2 ;;
esac
