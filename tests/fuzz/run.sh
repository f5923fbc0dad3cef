#!/usr/bin/env bash
# run.sh FUZZER SEEDS WORK RUNS: runs one libFuzzer harness for RUNS
# executions, starting from the seed corpus SEEDS (read only) and keeping
# what it finds in WORK, so the source tree is never written to. Prints the
# final statistics (executions, coverage, corpus).
set -euo pipefail
fuzzer=$1
seeds=$2
work=$3
runs=$4
mkdir -p "$work"
exec "$fuzzer" -runs="$runs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
	-max_len=8192 -artifact_prefix="$work-" "$work" "$seeds"
