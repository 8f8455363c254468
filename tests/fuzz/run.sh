#!/usr/bin/env bash
# Coverage-guided fuzzing of the compiled chunk parser with libFuzzer, under ASan and UBSan.
#   bash tests/fuzz/run.sh [SECONDS]   (default 60; needs clang: apt-get install clang)
# The seeds are chunks cut from generated traces (tests/fuzz/seeds.py); new inputs that widen
# coverage are kept in $CCLQ_FUZZ_CORPUS (default: a temporary folder). A corpus that already
# holds inputs is fuzzed as it is (.ci/run writes the seeds before pip reinstalls cclq).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seconds="${1:-60}"
work="$(mktemp -d)"
corpus="${CCLQ_FUZZ_CORPUS:-$work/corpus}"
mkdir -p "$corpus"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$here/fuzz_eventparse.c" "$here/../../cclq/formats/chrome/eventparse_core.c" \
  "$here/../../cclq/formats/chrome/eventparse_json.c" -o "$work/fuzz_eventparse"
[ -n "$(ls -A "$corpus")" ] || python3 "$here/seeds.py" "$corpus"
"$work/fuzz_eventparse" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/" -dict="$here/json.dict" "$corpus"
echo "fuzz: no crash in $seconds s (artifacts would be in $work)"
