#!/usr/bin/env bash
# Committed records (docs/validation/, calibration profiles) hold no absolute path of a machine:
# commands and file names are written relative to the repository root. Checks the plain and the
# JSON-escaped (\/) spelling of the usual roots; prints each offending line and exits 1.
# Usage: scripts/check-records.sh [DIR...]   (default: docs/validation calibrate/profiles)
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(docs/validation calibrate/profiles)
pattern='(^|[^A-Za-z0-9_.~-])(/|\\/)(work|home|root|tmp|mnt|scratch|opt|var|srv|data)(/|\\/)[A-Za-z0-9_.-]'
if grep -rnIE "$pattern" "${dirs[@]}"; then
  echo "check-records: absolute paths above; write them relative to the repository root" >&2
  exit 1
fi
echo "check-records: no absolute paths in ${dirs[*]}"
