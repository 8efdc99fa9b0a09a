#!/usr/bin/env bash
# One prepared GPU session for issues 7 and 8 (one H200, limited device time): kernel correctness
# tests, `calibrate kernels` for the default scenario's shapes (with the GEMM grid) and a small GPT,
# then for a ~1.3B GPT and one 175B-shaped layer on one GPU: `run` with the measured profile,
# `execute` the same Program, and `compare`. Everything lands under $OUT.
#
#   here:   scripts/gpu-record.sh pack            # strip trainsim + the GPU test, copy non-CUDA libs
#   there:  OUT=/some/dir scripts/gpu-record.sh run   # → $OUT/gpu-record.tgz
#           PROFILE=measured.json OUT=... scripts/gpu-record.sh run   # only run/execute/compare
set -u -o pipefail
mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
pack_dir=$root/build/gpu-record

pack() {
  local build=$root/build/default
  rm -rf "$pack_dir" && mkdir -p "$pack_dir/lib"
  strip --strip-unneeded -o "$pack_dir/trainsim" "$build/cli/trainsim"
  strip --strip-unneeded -o "$pack_dir/kernels_test_kernels_gpu" "$build/tests/kernels_test_kernels_gpu"
  ldd "$pack_dir/trainsim" "$pack_dir/kernels_test_kernels_gpu" | awk '/=> \// {print $3}' | sort -u |
    while read -r lib; do
      case $(basename "$lib") in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so*) ;;
        *) [[ $lib == /usr/local/cuda* ]] || cp -L "$lib" "$pack_dir/lib/" ;;
      esac
    done
  du -sh "$pack_dir"
}

run() {
  # Work in a scratch folder; $OUT receives one archive (the device tool returns few files).
  local out=${WORK:-/tmp/gpu-record} dest=${OUT:-$root/out}
  rm -rf "$out" && mkdir -p "$out" "$dest"
  cd "$root" || return 1
  export LD_LIBRARY_PATH="$pack_dir/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  local ts=$pack_dir/trainsim summary=$out/summary.txt
  : >"$summary"
  step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS rc
    echo "\$ $*" >"$out/$name.log"
    timeout "$limit" "$@" >>"$out/$name.log" 2>&1
    rc=$?
    printf '%-26s rc=%-3s %4ss\n' "$name" "$rc" $((SECONDS - start)) | tee -a "$summary"
  }
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv;
    git -C "$root" rev-parse HEAD; } >"$out/machine.txt" 2>&1
  if [[ -n ${PROFILE:-} ]]; then
    cp "$PROFILE" "$out/profile-h200-megascale-175b.json"   # a profile measured earlier: skip to the comparisons
  else
  step kernels_gpu_tests 90 "$pack_dir/kernels_test_kernels_gpu" --gtest_output="json:$out/kernels_gpu_tests.json"
  step calibrate_175b 170 "$ts" calibrate kernels --scenario scenarios/megascale-175b-12288.yaml \
    --set optimizations.efficient_operators=false --repeats 10 --warmup 3 \
    --out "$out/profile-h200-megascale-175b.json"
  step calibrate_small_gpt 60 "$ts" calibrate kernels --scenario scenarios/examples/megatron-1.7b-32xa100.yaml \
    --set cluster.gpu=h200-sxm --no-grid --repeats 10 --warmup 3 --out "$out/profile-h200-gpt-1.7b.json"
  fi
  local prof=$out/profile-h200-megascale-175b.json
  local base="scenarios/megascale-175b-12288.yaml --set cluster.gpu=h200-sxm --set cluster.gpus=1"
  base+=" --set parallel.tp=1 --set parallel.pp=1 --set parallel.vpp=1 --set parallel.dp=1"
  base+=" --set optimizations.efficient_operators=false"
  local -A scen
  scen[gpt-1.3b]="--set model.layers=24 --set model.hidden=2048 --set model.heads=16"
  scen[gpt-1.3b]+=" --set model.ffn_hidden=8192 --set model.seq_len=2048 --set model.vocab=51200"
  scen[gpt-1.3b]+=" --set training.global_batch=4 --set training.micro_batch=2"
  scen[175b-layer]="--set model.preset=gpt3-175b --set model.layers=1"
  scen[175b-layer]+=" --set training.global_batch=2 --set training.micro_batch=1"
  local name
  for name in gpt-1.3b 175b-layer; do
    local dir=$out/$name
    mkdir -p "$dir"
    step "$name-run-measured" 60 "$ts" run $base ${scen[$name]} --set calibration.profile="$prof" \
      --fidelity schedule --format json -o "$dir/sim-measured.json"
    step "$name-run-datasheet" 60 "$ts" run $base ${scen[$name]} --fidelity schedule --format json \
      -o "$dir/sim-datasheet.json"
    step "$name-execute" 100 "$ts" execute $base ${scen[$name]} --iterations 5 --warmup 2 \
      --timeout 90 --out "$dir/real.json"
    step "$name-compare" 30 "$ts" compare "$dir/sim-measured.json" "$dir/real.json" --format markdown \
      --out "$dir/compare-measured.md"
    step "$name-compare-ds" 30 "$ts" compare "$dir/sim-datasheet.json" "$dir/real.json" \
      --format markdown --out "$dir/compare-datasheet.md"
  done
  date -u +%FT%TZ >>"$summary"
  # Committed records hold no absolute path of either machine: commands and provenance strings
  # name the repository root's files relative to it and the record's own files by their name.
  # JSON writers escape the slashes (gtest's --gtest_output=json writes "\/work\/..."), so both
  # spellings are scrubbed; scripts/check-records.sh (a ctest) checks what is committed.
  local esc_root esc_out
  esc_root=$(sed 's#/#\\\\/#g' <<<"$root")
  esc_out=$(sed 's#/#\\\\/#g' <<<"$out")
  grep -rlIF -e "$root/" -e "$out/" -e "${root//\//\\/}" -e "${out//\//\\/}" "$out" |
    while read -r f; do
      sed -i -e "s#$out/##g" -e "s#$root/##g" -e "s#${esc_out}\\\\/##g" \
        -e "s#${esc_root}\\\\/##g" "$f"
    done
  tar czf "$dest/gpu-record.tgz" -C "$out" .
  cat "$summary"
}

case $mode in
  pack) pack ;;
  run) run ;;
  *) echo "usage: $0 pack | run" >&2; exit 2 ;;
esac
