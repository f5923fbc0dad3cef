#!/usr/bin/env bash
# bench.sh: webhook throughput and latency, group commit on and off, in one run.
# Usage: contrib/bench/bench.sh [CALLBACKS] [CLIENTS]
set -euo pipefail
cd "$(dirname "$0")/../.."

n="${1:-4000}"
clients="${2:-32}"
contrib/install-deps.sh
if [ ! -f build-bench/build.ninja ]; then
	meson setup build-bench --buildtype=release >/dev/null
fi
meson compile -C build-bench receiver/cli/idemhook contrib/bench/bench_hooks >/dev/null
IDEMHOOK_BIN="$PWD/build-bench/receiver/cli/idemhook" build-bench/contrib/bench/bench_hooks "$n" "$clients"
echo
echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype . | tail -1)"
echo "reproduce: contrib/bench/bench.sh $n $clients"
