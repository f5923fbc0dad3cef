#!/usr/bin/env bash
# gc_vacuum.sh: how big the database file is before and after cleanup deletes
# ROWS expired callbacks (an idempotency record with its stored reply and an
# event with its payload each; ROWS/10 recent ones stay), for a database with
# incremental vacuum (what idemhook creates) under the daemon's worker, and
# for an older database without it under `idemhook gc`, then
# `idemhook gc --vacuum`.
# Usage: contrib/bench/gc_vacuum.sh [ROWS]
set -euo pipefail
cd "$(dirname "$0")/../.."

rows="${1:-220000}"
. contrib/bench/common.sh
bench_binary
work="$(mktemp -d /tmp/idemhook-vacuum.XXXXXX)"
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

write_config() { # NAME INTERVAL
	cat >"$work/$1.ini" <<INI
[server]
listen = 127.0.0.1:0
port_file = $work/$1.port

[store]
path = $work/$1.db

[admin]
listen = off

[gc]
interval = $2

[provider stripe]
type = stripe
secret = whsec_vacuum_bench_secret
INI
}

fill() { # NAME
	python3 - "$work/$1.db" "$rows" <<'PY'
import json, sqlite3, sys, time
db, rows = sys.argv[1], int(sys.argv[2])
now = int(time.time() * 1000)
day = 86400 * 1000
reply = json.dumps({"received": True, "order_id": "ord_0123456789abcdefghij", "outcome": "paid"})
c = sqlite3.connect(db)
c.execute("PRAGMA journal_mode=WAL")
live = rows // 10
def age(i):
    # the first ROWS are 8 days old (expired), the last ROWS/10 an hour
    return 8 * day + i if i < rows else 3600 * 1000 + i
for start in range(0, rows + live, 20000):
    batch = range(start, min(rows + live, start + 20000))
    # one row per key, with its event (migration 0012)
    c.executemany(
        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, reply_status,"
        " reply_content_type, reply_body, created_at, updated_at, type, kind, order_ref,"
        " payment_ref, amount, currency, payload, outcome, effect, received_at, processed_at)"
        " VALUES ('stripe', ?, 'done', randomblob(32), 200, 'application/json', ?, ?, ?,"
        " 'payment_intent.succeeded', 'payment_succeeded', ?, ?, 1999, 'USD', ?, 'done', 'paid',"
        " ?, ?)",
        ((f"evt_{'old' if i < rows else 'new'}_{i:08d}", reply, now - age(i), now - age(i),
          f"ord_{i:020d}", f"pi_{i:024d}",
          json.dumps({"type": "payment_intent.succeeded", "data": {"object": {
              "id": f"pi_{i:024d}", "amount": 1999, "currency": "usd",
              "metadata": {"order_id": f"ord_{i:020d}"}}}}),
          now - age(i), now - age(i)) for i in batch))
    c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
c.close()
PY
}

size() { # NAME: database and WAL in bytes
	local n=0 f
	for f in "$work/$1.db" "$work/$1.db-wal"; do
		if [ -f "$f" ]; then
			n=$((n + $(stat -c %s "$f")))
		fi
	done
	echo "$n"
}

mib() {
	python3 -c "print(f'{$1 / 1048576:.1f} MiB')"
}

left() { # NAME
	python3 -c "import sqlite3,sys; c=sqlite3.connect('file:$work/$1.db?mode=ro', uri=True); \
print(c.execute(\"SELECT (SELECT count(*) FROM idempotency_records WHERE idem_key LIKE 'evt_old_%') + \
(SELECT count(*) FROM events WHERE idem_key LIKE 'evt_old_%')\").fetchone()[0])"
}

echo "filling $rows expired callbacks twice..." >&2
write_config new 1s
"$bin" -q -c "$work/new.ini" migrate >/dev/null
fill new
write_config old 0
"$bin" -q -c "$work/old.ini" migrate >/dev/null
sqlite3 "$work/old.db" "PRAGMA auto_vacuum = NONE; VACUUM;"
fill old

new_before="$(size new)"
start_daemon new
t0="$(date +%s.%N)"
# the pass gives the space back right after its last batch: wait until the
# rows are gone, the file has shrunk and stays put for 2 s (at most 10 min)
last=-1
t1=""
for _ in $(seq 1 6000); do
	now_size="$(size new)"
	if [ "$(left new)" = 0 ] && [ "$now_size" -lt $((new_before * 2 / 3)) ] && [ "$now_size" = "$last" ]; then
		if python3 -c "import sys,time; sys.exit(0 if time.time() - $t1 >= 2 else 1)"; then
			break
		fi
	else
		t1="$(date +%s.%N)"
	fi
	last="$now_size"
	sleep 0.1
done
new_after="$(size new)"
stop_daemon

old_before="$(size old)"
"$bin" -q -c "$work/old.ini" gc >/dev/null
old_gc="$(size old)"
t2="$(date +%s.%N)"
"$bin" -q -c "$work/old.ini" gc --vacuum >/dev/null
t3="$(date +%s.%N)"
old_after="$(size old)"

echo "expired callbacks deleted: $rows (records and events); recent ones kept: $((rows / 10))"
printf '%-44s %12s %12s\n' "" "before" "after"
printf '%-44s %12s %12s   (start to settled: %.1f s)\n' \
	"new database (incremental), daemon's gc" "$(mib "$new_before")" "$(mib "$new_after")" \
	"$(python3 -c "print($t1 - $t0)")"
printf '%-44s %12s %12s\n' "older database, idemhook gc" "$(mib "$old_before")" "$(mib "$old_gc")"
printf '%-44s %12s %12s   (%.1f s)\n' "older database, then idemhook gc --vacuum" "$(mib "$old_gc")" \
	"$(mib "$old_after")" "$(python3 -c "print($t3 - $t2)")"
echo
echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype /tmp | tail -1)"
echo "reproduce: contrib/bench/gc_vacuum.sh $rows"
