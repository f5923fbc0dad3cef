#!/usr/bin/env bash
# gc_latency.sh: p99 callback latency while the daemon's cleanup deletes
# 1,000,000 expired records, against p99 with no cleanup, in the same run.
# Usage: [GC_BATCH=5000] [GC_PAUSE=50ms] contrib/bench/gc_latency.sh [EXPIRED_ROWS] [CLIENTS]
#
# Two databases start identical (EXPIRED_ROWS records 8-9 days old, past the
# 7-day retention). Phase "gc": a daemon with [gc] interval = 1s, batch =
# GC_BATCH, pause = GC_PAUSE (the defaults) serves unique signed Stripe callbacks from CLIENTS
# keep-alive connections until the cleanup has deleted every expired row.
# Phase "no gc": a daemon with cleanup off serves the same load for as long.
# synchronous = full in both.
set -euo pipefail
cd "$(dirname "$0")/../.."

rows="${1:-1000000}"
clients="${2:-8}"
gc_batch="${GC_BATCH:-5000}"
gc_pause="${GC_PAUSE:-50ms}"
. contrib/bench/common.sh
bench_binary
work="$(mktemp -d /tmp/idemhook-gcbench.XXXXXX)"
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

secret="whsec_gc_bench_secret"
write_config() { # NAME INTERVAL
	cat >"$work/$1.ini" <<INI
[server]
listen = 127.0.0.1:0
port_file = $work/$1.port
threads = 8

[store]
path = $work/$1.db
synchronous = full

[admin]
listen = off

[gc]
interval = $2
batch = $gc_batch
pause = $gc_pause

[provider stripe]
type = stripe
secret = $secret
INI
}

write_config gc 1s
write_config nogc 0
"$bin" -q -c "$work/gc.ini" migrate >/dev/null
echo "filling $rows expired records..." >&2
python3 - "$work/gc.db" "$rows" <<'PY'
import sqlite3, sys, time
db, rows = sys.argv[1], int(sys.argv[2])
now = int(time.time() * 1000)
c = sqlite3.connect(db)
c.execute("PRAGMA journal_mode=WAL")
day = 86400 * 1000
batch = 50000
for start in range(0, rows, batch):
    c.executemany(
        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, reply_status,"
        " reply_content_type, reply_body, created_at, updated_at) VALUES"
        " ('stripe', ?, 'done', x'00', 200, 'application/json', '{\"received\":true}', ?, ?)",
        ((f"evt_old_{i:08d}", now - 8 * day - i * 80, now - 8 * day - i * 80)
         for i in range(start, min(rows, start + batch))))
    c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
c.close()
PY
cp "$work/gc.db" "$work/nogc.db"

# Load: CLIENTS keep-alive connections, unique signed callbacks, one at a time
# each. Mode "until-empty" runs until the expired rows are gone and prints the
# duration; mode "for SECONDS" runs that long. Prints latencies to a file.
load() { # NAME MODE ARG OUTFILE
	python3 - "$work/$1.db" "$(cat "$work/$1.port")" "$secret" "$clients" "$2" "$3" "$4" "$1" <<'PY'
import hashlib, hmac, http.client, json, sqlite3, sys, threading, time
db, port, secret, clients, mode, arg, out, tag = sys.argv[1:9]
port, clients = int(port), int(clients)
stop = threading.Event()
lat = [[] for _ in range(clients)]
errors = [0] * clients

def client(k):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    i = 0
    while not stop.is_set():
        i += 1
        now = int(time.time())
        body = json.dumps({"id": f"evt_{tag}_{k}_{i}", "object": "event", "created": now,
                           "type": "customer.created", "livemode": False,
                           "data": {"object": {"id": "cus_bench", "object": "customer"}}},
                          separators=(",", ":")).encode()
        mac = hmac.new(secret.encode(), f"{now}.".encode() + body, hashlib.sha256).hexdigest()
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/hooks/stripe", body,
                         {"Content-Type": "application/json", "Stripe-Signature": f"t={now},v1={mac}"})
            r = conn.getresponse()
            r.read()
            ok = r.status == 200
        except Exception:
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        lat[k].append((time.perf_counter() - t0) * 1000.0)
        if not ok:
            errors[k] += 1

threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
t0 = time.monotonic()
for t in threads:
    t.start()
if mode == "until-empty":
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    while True:
        time.sleep(0.2)
        left = ro.execute("SELECT count(*) FROM idempotency_records WHERE idem_key LIKE 'evt_old_%'").fetchone()[0]
        if left == 0 or time.monotonic() - t0 > 3600:
            break
else:
    time.sleep(float(arg))
stop.set()
for t in threads:
    t.join()
elapsed = time.monotonic() - t0
all_lat = sorted(x for l in lat for x in l)
with open(out, "w") as f:
    json.dump({"elapsed": elapsed, "lat": all_lat, "errors": sum(errors)}, f)
PY
}

echo "phase gc: cleanup on, load until every expired row is gone..." >&2
start_daemon gc
load gc until-empty 0 "$work/gc.json"
stop_daemon
seconds="$(python3 -c "import json;print(round(json.load(open('$work/gc.json'))['elapsed'],1))")"
gc_line="$(grep -a 'gc: deleted' "$work/gc.log" | head -n 1 || true)"

echo "phase no gc: cleanup off, same load for ${seconds} s..." >&2
start_daemon nogc
load nogc for "$seconds" "$work/nogc.json"
stop_daemon

python3 - "$work/gc.json" "$work/nogc.json" "$rows" "$gc_batch" "$gc_pause" <<'PY'
import json, sys
def pct(xs, p):
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]
gc, nogc, rows = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
print(f"expired rows deleted: {rows}, cleanup took {gc['elapsed']:.1f} s "
      f"({rows / gc['elapsed']:.0f} rows/s, batch = {sys.argv[4]}, pause = {sys.argv[5]})")
print(f"{'':12} {'callbacks':>10} {'cb/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>7}")
for name, r in (("gc running", gc), ("no gc", nogc)):
    xs = r["lat"]
    print(f"{name:12} {len(xs):>10} {len(xs) / r['elapsed']:>8.0f} {pct(xs, 50):>8.2f} {pct(xs, 99):>8.2f} "
          f"{(xs[-1] if xs else float('nan')):>8.2f} {r['errors']:>7}")
PY
if [ -n "$gc_line" ]; then
	echo "daemon: ${gc_line#<*>}"
fi
echo
echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype /tmp | tail -1)"
echo "reproduce: GC_BATCH=$gc_batch GC_PAUSE=$gc_pause contrib/bench/gc_latency.sh $rows $clients"
