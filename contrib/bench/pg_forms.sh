#!/usr/bin/env bash
# pg_forms.sh: the PostgreSQL server's CPU per new payment when the writer's
# statements reach it in each of four forms, BATCH payments per transaction,
# on a throwaway server this script starts (docs/benchmarks.md, "Where the
# floor is (issue 25, seventh round)"):
#   statements  each statement its own round trip (the writer before lanes)
#   lanes       statement k of every payment of the batch in one pipeline,
#               one pipeline after another (the writer's lanes, which also
#               hold some writes back: between this form and the next)
#   pipeline    the whole batch in one pipeline: the fewest round trips the
#               statements can take
#   function    one call of a PL/pgSQL function per payment
#               (contrib/bench/pg_callback_fn.sql), the batch in one pipeline
# The statements are contrib/bench/pg_callback.sql's eight; the function runs
# the same eight. Forms take turns, ROUNDS times, each on emptied tables and
# after a CHECKPOINT; the server's CPU is the postmaster's and its children's
# (user + system, reaped children included), the client's is pgbench's.
# synchronous_commit is off, so that the flush, which is the same in every
# form, leaves the comparison.
# Usage: contrib/bench/pg_forms.sh [ROUNDS [SECONDS [BATCH]]]
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds="${1:-5}"
secs="${2:-8}"
batch="${3:-8}"
. contrib/bench/common.sh
bench_binary
bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
if [ -z "$bindir" ] || ! command -v pgbench >/dev/null; then
	echo "pg_forms: PostgreSQL is not installed (contrib/install-deps.sh installs it)" >&2
	exit 1
fi
# In /tmp, not $TMPDIR: as root the server runs as the postgres user, who
# must be able to reach the directory through its parents.
work="$(mktemp -d /tmp/idemhook-pgforms.XXXXXX)"
as_pg=()
if [ "$(id -u)" = 0 ]; then
	as_pg=(runuser -u postgres --)
	chown postgres "$work"
fi
started=""
cleanup() {
	if [ -n "$started" ]; then
		"${as_pg[@]}" "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

"${as_pg[@]}" "$bindir/initdb" -D "$work/data" -U postgres -A trust >"$work/initdb.log" 2>&1
"${as_pg[@]}" "$bindir/pg_ctl" -D "$work/data" -l "$work/server.log" -w -o \
	"-p 5432 -k $work -c listen_addresses= -c fsync=on -c shared_buffers=64MB" start >/dev/null
started=1
psql=(psql -q -X -v ON_ERROR_STOP=1 -h "$work" -p 5432 -U postgres -d postgres)
printf '[store]\nbackend = postgresql\nconninfo = host=%s port=5432 dbname=postgres user=postgres\n' \
	"$work" >"$work/idemhook.ini"
"$bin" -q -c "$work/idemhook.ini" migrate >/dev/null
"${psql[@]}" -c "INSERT INTO orders (id, amount, currency, status, created_at, updated_at)
	SELECT 'ord_' || g, 1000, 'USD', 'pending', 1, 1 FROM generate_series(1, 100000) g"
"${psql[@]}" -f contrib/bench/pg_callback_fn.sql

# The eight statements of one payment, numbered i, its order (k + i) % 100000 + 1.
statements() { # I
	sed -n '/^INSERT INTO idempotency_records/,/^WITH one AS/p' contrib/bench/pg_callback.sql |
		sed "s/:r\\b/:r$1/g; s/'ord_' || :k/'ord_' || ((:k + $1) % 100000 + 1)/g"
}
sets() {
	echo '\set k random(1, 100000)'
	for i in $(seq 1 "$batch"); do
		echo "\\set r$i random(1, 9000000000000000000)"
	done
}
{
	sets
	echo 'BEGIN;'
	for i in $(seq 1 "$batch"); do statements "$i"; done
	echo 'COMMIT;'
} >"$work/statements.sql"
{
	sets
	echo 'BEGIN;'
	for s in $(seq 1 8); do
		echo '\startpipeline'
		for i in $(seq 1 "$batch"); do statements "$i" | sed -n "${s}p"; done
		echo '\endpipeline'
	done
	echo 'COMMIT;'
} >"$work/lanes.sql"
{
	sets
	echo '\startpipeline'
	echo 'BEGIN;'
	for i in $(seq 1 "$batch"); do statements "$i"; done
	echo 'COMMIT;'
	echo '\endpipeline'
} >"$work/pipeline.sql"
{
	sets
	echo '\startpipeline'
	echo 'BEGIN;'
	for i in $(seq 1 "$batch"); do
		echo "SELECT bench_callback(:scope, :r$i::text, 'ord_' || ((:k + $i) % 100000 + 1), :fp);"
	done
	echo 'COMMIT;'
	echo '\endpipeline'
} >"$work/function.sql"
if [ "$(statements 1 | wc -l)" != 8 ]; then
	echo "pg_forms: contrib/bench/pg_callback.sql no longer has its eight statements" >&2
	exit 1
fi

# The server's CPU so far, in clock ticks: the postmaster with its reaped
# children, and the children alive now.
server_ticks() {
	local pm t=0 f
	pm="$(head -n 1 "$work/data/postmaster.pid")"
	for p in "$pm" $(pgrep -P "$pm"); do
		f="$(cat "/proc/$p/stat" 2>/dev/null)" || continue
		set -- ${f##*) }
		if [ "$p" = "$pm" ]; then
			t=$((t + ${12} + ${13} + ${14} + ${15}))
		else
			t=$((t + ${12} + ${13}))
		fi
	done
	echo "$t"
}
hz="$(getconf CLK_TCK)"
forms=(statements lanes pipeline function)
declare -A server client rate
echo "PostgreSQL server CPU per new payment, $batch payments per transaction, $secs s per form," \
	"forms in turn, $rounds rounds ($("${psql[@]}" -At -c 'SHOW server_version'))"
printf '%-6s %-11s %10s %14s %14s\n' round form "payments/s" "server us/cb" "pgbench us/cb"
for r in $(seq 1 "$rounds"); do
	for f in "${forms[@]}"; do
		"${psql[@]}" -c "TRUNCATE idempotency_records, order_refs, points_ledger" \
			-c "VACUUM ANALYZE orders" -c "CHECKPOINT"
		c0="$(server_ticks)"
		out="$(
			PGOPTIONS='-c synchronous_commit=off' pgbench -h "$work" -p 5432 -U postgres -n \
				-M prepared -T "$secs" -f "$work/$f.sql" -D scope=stripe \
				-D processing=processing -D 'fp=\x7b7d' -D award=award -D clawback=clawback \
				-D restore=restore -D paid=paid -D zero=0 -D payment=payment -D done=done \
				-D ct=application/json -D type=payment_intent.succeeded \
				-D kind=payment_succeeded -D usd=USD postgres 2>&1
			times
		)"
		c1="$(server_ticks)"
		if grep -q 'aborted' <<<"$out"; then
			echo "pg_forms: pgbench failed on $f:" >&2
			echo "$out" >&2
			exit 1
		fi
		tx="$(awk '/number of transactions actually processed/ {split($NF, a, "/"); print a[1]}' <<<"$out")"
		# times: the shell's, then its children's user and system time (NmN.NNNs)
		cl="$(tail -n 1 <<<"$out" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m");
			n += a[1] * 60 + a[2] } print n }')"
		cb=$((tx * batch))
		server[$f]+="$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$cb" 'BEGIN { printf "%.0f ", t / hz * 1e6 / n }')"
		client[$f]+="$(awk -v s="$cl" -v n="$cb" 'BEGIN { printf "%.0f ", s * 1e6 / n }')"
		rate[$f]+="$((cb / secs)) "
		printf '%-6s %-11s %10d %14s %14s\n' "$r" "$f" $((cb / secs)) \
			"$(awk '{print $NF}' <<<"${server[$f]}")" "$(awk '{print $NF}' <<<"${client[$f]}")"
	done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo
echo "medians over $rounds rounds:"
for f in "${forms[@]}"; do
	printf '  %-11s %8s payments/s, server %5s us, pgbench %4s us per payment\n' "$f" \
		"$(median <<<"${rate[$f]}")" "$(median <<<"${server[$f]}")" \
		"$(median <<<"${client[$f]}")"
done
echo "reproduce: contrib/bench/pg_forms.sh $rounds $secs $batch"
