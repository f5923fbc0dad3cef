#!/usr/bin/env bash
# bench.sh: the webhook benchmark of docs/benchmarks.md in one run: idemhook
# at its default configuration (unique and duplicate callbacks, 32 and 256
# connections, p99 at half the peak rate), idemhook with batch_max = 1, the
# storage ceiling (one INSERT per transaction, synchronous=FULL, WAL), the HTTP
# ceiling (libmicrohttpd answering 200 with no work), batch sizes and commits
# from /metrics, peak RSS, and in-process replay of 10,000 captures; then the
# ratios against the targets of issue 10.
# Usage: contrib/bench/bench.sh [CALLBACKS]   (per unique phase, default 20000)
set -euo pipefail
cd "$(dirname "$0")/../.."

n="${1:-20000}"
contrib/install-deps.sh
if [ ! -f build-bench/build.ninja ]; then
	meson setup build-bench --buildtype=release >/dev/null
fi
meson compile -C build-bench receiver/cli/idemhook contrib/bench/bench_hooks contrib/bench/sqlite_ceiling \
	contrib/bench/http_ceiling >/dev/null
IDEMHOOK_BIN="$PWD/build-bench/receiver/cli/idemhook" build-bench/contrib/bench/bench_hooks "$n"
echo
echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype "${TMPDIR:-/tmp}" | tail -1)"
echo "reproduce: contrib/bench/bench.sh $n"
