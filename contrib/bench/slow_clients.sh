#!/usr/bin/env bash
# slow_clients.sh: the slow-client benchmark of docs/benchmarks.md: signed
# callbacks with no other client, then with N connections (default 5,000)
# trickling their heads from 100 other loopback addresses; latency p50/p99,
# errors, slow connections open and closed by the daemon.
# Usage: contrib/bench/slow_clients.sh [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."

n="${1:-5000}"
if [ ! -f build-bench/build.ninja ]; then
	meson setup build-bench --buildtype=release >/dev/null
fi
meson compile -C build-bench receiver/cli/idemhook contrib/bench/bench_slow_clients >/dev/null
IDEMHOOK_BIN="${IDEMHOOK_BIN:-$PWD/build-bench/receiver/cli/idemhook}" build-bench/contrib/bench/bench_slow_clients "$n"
echo
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "reproduce: contrib/bench/slow_clients.sh $n"
