#!/usr/bin/env bash
# bench.sh: the webhook benchmark of docs/benchmarks.md in one run: idemhook
# at its default configuration (unique and duplicate callbacks, 32 and 256
# connections, p99 at half the peak rate), idemhook with batch_max = 1, the
# storage ceiling (one INSERT per transaction, synchronous=FULL, WAL), the HTTP
# ceiling (libmicrohttpd answering 200 with no work), batch sizes and commits
# from /metrics, peak RSS, in-process replay of 10,000 captures, bytes handed
# to pwrite and written to disk per callback, and the unique phases on a
# database holding STORED callbacks (bench_fill); then the ratios against the
# targets of issues 10 and 24.
# With --postgresql: unique and duplicate callbacks with one receiver on
# SQLite, and one, two and three on one PostgreSQL database (a local
# throwaway server, synchronous_commit=on), then one and three with 1 ms
# added each way (a delaying proxy), with statements and transactions per
# callback from pg_stat_statements, the writers' round trips per batch and
# CPU per callback (docs/benchmarks.md, PostgreSQL). IDEMHOOK_BIN_BASE=an
# older idemhook binary adds its one-receiver phases, for a before/after.
# Usage: contrib/bench/bench.sh [CALLBACKS [STORED [ROUNDS]]]   (per unique phase, default 20000;
#        callbacks already in the large database, default 1000000, filled by bench_fill;
#        ROUNDS, default 1, up to 9: the whole benchmark that many times, each round with
#        its own daemons and large database, then every target's figure in each round
#        and their median;
#        BENCH_LARGE_DB=PATH keeps the filled database at PATH, on the filesystem of
#        TMPDIR, and later runs and rounds use it instead of filling again: 10000000
#        takes minutes)
#        contrib/bench/bench.sh --postgresql [CALLBACKS]   (per phase, default 5000)
set -euo pipefail
cd "$(dirname "$0")/../.."

postgresql=0
if [ "${1:-}" = "--postgresql" ]; then
	postgresql=1
	shift
fi
n="${1:-20000}"
stored="${2:-1000000}"
rounds="${3:-1}"
contrib/install-deps.sh
if [ ! -f build-bench/build.ninja ]; then
	meson setup build-bench --buildtype=release >/dev/null
fi
if [ "$postgresql" = 1 ]; then
	n="${1:-5000}"
	meson compile -C build-bench receiver/cli/idemhook contrib/bench/bench_pg >/dev/null
	IDEMHOOK_BIN="$PWD/build-bench/receiver/cli/idemhook" build-bench/contrib/bench/bench_pg "$n"
	echo
	echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype "${TMPDIR:-/tmp}" | tail -1)"
	echo "reproduce: contrib/bench/bench.sh --postgresql $n"
	exit 0
fi
meson compile -C build-bench receiver/cli/idemhook contrib/bench/bench_hooks contrib/bench/sqlite_ceiling contrib/bench/bench_fill \
	contrib/bench/http_ceiling contrib/bench/bench_store >/dev/null
IDEMHOOK_BIN="$PWD/build-bench/receiver/cli/idemhook" build-bench/contrib/bench/bench_hooks "$n" "$stored" "$rounds"
echo
echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype "${TMPDIR:-/tmp}" | tail -1)"
echo "reproduce: contrib/bench/bench.sh $n $stored $rounds"
