#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (docs/reliability.md), built with clang, AddressSanitizer
# and UndefinedBehaviorSanitizer in their own build folder.
#
#   scripts/fuzz.sh build [BUILD_DIR]                 configure + build every target (default build/fuzz)
#   scripts/fuzz.sh smoke TARGET [BUILD_DIR]          regression inputs, then a few seconds of fuzzing
#   scripts/fuzz.sh run [SECONDS] [TARGET...]         long runs (default 600 s each, every target);
#                                                     logs in BUILD_DIR/logs, new inputs in BUILD_DIR/corpus
#
# Targets: scenario validation_csv nccl_tests profile graphml dot compare. A crash, a hang (an
# input over 5 s) or a memory blow-up (over 2 GB RSS) fails the run and leaves the input in the
# current folder (crash-*, timeout-*, oom-*). Exit 77: no clang++ with libFuzzer here (skipped).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGETS=(scenario validation_csv nccl_tests profile graphml dot compare)
SMOKE_SECONDS=${TRAINSIM_FUZZ_SMOKE_SECONDS:-3}
FLAGS=(-timeout=5 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1)

clangxx() {
  local c=${TRAINSIM_CLANGXX:-}
  if [[ -z $c ]]; then c=$(command -v clang++ || command -v clang++-14 || true); fi
  echo "$c"
}

have_libfuzzer() {
  local c tmp
  c=$(clangxx)
  [[ -n $c ]] || return 1
  tmp=$(mktemp -d)
  printf '#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
    >"$tmp/t.cpp"
  local rc=0
  "$c" -fsanitize=fuzzer,address,undefined "$tmp/t.cpp" -o "$tmp/t" >/dev/null 2>&1 || rc=1
  rm -rf "$tmp"
  return $rc
}

build() {
  local dir=${1:-$ROOT/build/fuzz}
  if ! have_libfuzzer; then
    echo "fuzz: no clang++ with libFuzzer (install clang-14 and libclang-rt-14-dev); skipped"
    exit 77
  fi
  local sanitize="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=all"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$(clangxx)" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINSIM_BUILD_TESTS=OFF -DTRAINSIM_BUILD_BENCH=OFF \
    -DTRAINSIM_WITH_CUDA=OFF -DTRAINSIM_BUILD_FUZZ=ON -DTRAINSIM_WERROR=OFF \
    -DCMAKE_CXX_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  nice cmake --build "$dir" -j"${TRAINSIM_FUZZ_JOBS:-2}" --target fuzzers
}

binary() {
  local dir=$1 t=$2
  local b="$dir/tests/fuzz/fuzz_$t"
  if [[ ! -x $b ]]; then
    if ! have_libfuzzer; then echo "fuzz: no clang++ with libFuzzer; skipped"; exit 77; fi
    echo "fuzz: $b is not built (scripts/fuzz.sh build $dir)" >&2
    exit 1
  fi
  echo "$b"
}

smoke() {
  local t=$1 dir=${2:-$ROOT/build/fuzz}
  local b seeds work
  b=$(binary "$dir" "$t")
  seeds="$ROOT/tests/fuzz/$t"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  cd "$work"
  # 1. Every seed and regression input, whole (no truncation), once.
  local inputs=()
  while IFS= read -r f; do inputs+=("$f"); done < <(find "$seeds" -maxdepth 1 -type f | sort)
  "$b" -timeout=5 -rss_limit_mb=2048 "${inputs[@]}" 2>&1 | tail -n 3
  # 2. A few seconds of fuzzing from the seeds (new inputs go to a scratch folder).
  mkdir corpus
  "$b" "${FLAGS[@]}" -seed=1 -max_total_time="$SMOKE_SECONDS" corpus "$seeds" 2>&1 | tail -n 6
}

run() {
  local seconds=${1:-600}
  shift || true
  local targets=("$@")
  [[ ${#targets[@]} -gt 0 ]] || targets=("${TARGETS[@]}")
  local dir=${TRAINSIM_FUZZ_DIR:-$ROOT/build/fuzz}
  mkdir -p "$dir/logs"
  for t in "${targets[@]}"; do
    local b
    b=$(binary "$dir" "$t")
    mkdir -p "$dir/corpus/$t" "$dir/artifacts/$t"
    echo "fuzz: $t for $seconds s (log: $dir/logs/$t.log)"
    "$b" "${FLAGS[@]}" -max_total_time="$seconds" -artifact_prefix="$dir/artifacts/$t/" \
      "$dir/corpus/$t" "$ROOT/tests/fuzz/$t" >"$dir/logs/$t.log" 2>&1 || {
      echo "fuzz: $t FAILED, see $dir/logs/$t.log"
      tail -n 30 "$dir/logs/$t.log"
      exit 1
    }
    grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" \
      "$dir/logs/$t.log" | tail -n 5
  done
}

cmd=${1:-}
shift || true
case $cmd in
  build) build "$@" ;;
  smoke) smoke "$@" ;;
  run) run "$@" ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
