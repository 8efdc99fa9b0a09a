#!/usr/bin/env bash
# GPU check of trainsim's kernels and calibration, for a machine with an NVIDIA GPU (written for
# one H200). It builds nothing: it runs programs built elsewhere with CUDA on.
#
#   scripts/gpu-check.sh pack [BUILD_DIR] [PACK_DIR]
#       On the build machine: copy the trainsim binary and the GPU-relevant test programs from
#       BUILD_DIR (default build/default) into PACK_DIR (default build/gpu-check), without debug
#       info, with the non-CUDA shared libraries they need (lib/), so the folder can travel to
#       the GPU machine (~40 MB). The CUDA libraries (cuBLASLt, NCCL, the driver) must be there.
#
#   scripts/gpu-check.sh run [PACK_DIR]
#       On the GPU machine, from the repository root: run the GPU tests (kernels vs CPU
#       references), the CPU tests of the references and fits, `trainsim calibrate kernels` for
#       the MegaScale 175B scenario's shapes plus the standard grid and for a small GPT, a refit
#       of the recorded samples, a Llama 3 8B simulation with the datasheet and with the measured
#       profile, and `calibrate nccl` (needs 2+ GPUs; on one it must exit 4).
#       Everything goes to $OUT (default out/gpu-check): test XML/JSON, profiles, logs, and
#       summary.txt with one line per step. Exit status: 0 when every step did what it should.
set -u -o pipefail

mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
# Programs that need no file of the source tree (their compiled-in TRAINSIM_SOURCE_DIR may not
# exist on the GPU machine); the other CPU tests run in CI.
tests=(kernels_test_kernels_gpu kernels_test_reference kernels_test_device_info)

pack() {
  local build=${1:-$root/build/default} dest=${2:-$root/build/gpu-check}
  rm -rf "$dest" && mkdir -p "$dest/lib"
  local prog
  for prog in "$build/cli/trainsim" "${tests[@]/#/$build/tests/}"; do
    [[ -x $prog ]] || { echo "missing $prog (build it first)" >&2; return 1; }
    strip --strip-unneeded -o "$dest/$(basename "$prog")" "$prog"
  done
  # Shared libraries other than glibc's and CUDA's: the GPU machine may not have them installed.
  local lib
  ldd "$dest"/* 2>/dev/null | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) continue ;;
    esac
    [[ $lib == /usr/local/cuda* ]] && continue
    cp -L "$lib" "$dest/lib/"
  done
  du -sh "$dest"
}

run() {
  local pack_dir=${1:-$root/build/gpu-check}
  local out=${OUT:-$root/out/gpu-check}
  mkdir -p "$out"
  cd "$root" || return 1
  export LD_LIBRARY_PATH="$pack_dir/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
  local summary=$out/summary.txt failures=0
  : >"$summary"
  # step NAME EXPECTED_RC TIMEOUT_S CMD...: runs CMD with stdout/stderr in $out/NAME.log.
  step() {
    local name=$1 want=$2 limit=$3
    shift 3
    local start=$SECONDS rc
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    local verdict=ok
    [[ $rc == "$want" ]] || { verdict=FAIL; failures=$((failures + 1)); }
    printf '%-28s %-4s rc=%-3s want=%-3s %4ss\n' "$name" "$verdict" "$rc" "$want" \
      $((SECONDS - start)) | tee -a "$summary"
  }
  {
    date -u +%FT%TZ
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
    git -C "$root" rev-parse HEAD 2>/dev/null || true
  } >"$out/machine.txt" 2>&1
  local t
  for t in "${tests[@]}"; do
    step "$t" 0 300 "$pack_dir/$t" --gtest_output="json:$out/$t.json"
  done
  # Any skipped GPU test means the device was not usable: that is a failure here.
  if grep -q '"result": "SKIPPED"\|"skipped"' "$out/kernels_test_kernels_gpu.json" 2>/dev/null &&
     grep -q 'no CUDA device' "$out/kernels_test_kernels_gpu.log"; then
    echo "kernels_test_kernels_gpu    FAIL tests were skipped: no usable device" | tee -a "$summary"
    failures=$((failures + 1))
  fi
  local ts=$pack_dir/trainsim
  step info 0 60 "$ts" info
  step calibrate_megascale_175b 0 420 "$ts" calibrate kernels \
    --scenario scenarios/megascale-175b-12288.yaml --out "$out/profile-megascale-175b.json"
  step calibrate_small_gpt 0 240 "$ts" calibrate kernels \
    --scenario scenarios/examples/megatron-1.7b-32xa100.yaml --no-grid --repeats 20 \
    --out "$out/profile-megatron-1.7b.json"
  step refit_megascale 0 60 "$ts" calibrate refit "$out/profile-megascale-175b.json" \
    --out "$out/profile-megascale-175b-refit.json"
  # The simulator reads the measured profile: the same Llama 3 8B run on this GPU with the
  # built-in datasheet profile and with the measured one.
  local prof=$out/profile-megascale-175b.json preset
  preset=$(sed -n 's/^  "gpu": "\(.*\)",$/\1/p' "$prof" 2>/dev/null | head -1)
  if [[ -n $preset ]]; then
    step run_llama3_8b_datasheet 0 60 "$ts" run scenarios/examples/llama3-8b-64xh100.yaml \
      --set cluster.gpu="$preset" --format json
    step run_llama3_8b_measured 0 60 "$ts" run scenarios/examples/llama3-8b-64xh100.yaml \
      --set cluster.gpu="$preset" --set calibration.profile="$prof" --format json
  fi
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [[ $gpus -ge 2 ]]; then
    step calibrate_nccl 0 420 "$ts" calibrate nccl --max-bytes 256M --out "$out/profile-nccl.json"
  else
    step calibrate_nccl_one_gpu 4 60 "$ts" calibrate nccl --out "$out/profile-nccl.json"
  fi
  echo "failures: $failures" | tee -a "$summary"
  [[ $failures == 0 ]]
}

case $mode in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 pack [BUILD_DIR] [PACK_DIR] | run [PACK_DIR]" >&2; exit 2 ;;
esac
