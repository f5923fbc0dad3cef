#!/usr/bin/env bash
# outbound_hang.sh: callbacks keep being acknowledged at full speed while the
# shop's endpoint hangs: the webhook path never waits on the outbound path.
# Usage: [IDEMHOOK_BIN=...] contrib/bench/outbound_hang.sh [CALLBACKS] [CLIENTS]
#
# Phase "hanging peer": [outbound] notify_url points at a local server that
# accepts every connection and never answers (timeout 30 s, concurrency 8), so
# every paid callback queues a row the worker cannot deliver. Phase "no
# outbound": the same load without an [outbound] section. Each phase sends
# CALLBACKS unique signed payment_intent.succeeded callbacks (one per order)
# from CLIENTS keep-alive connections; synchronous = full in both.
set -euo pipefail
cd "$(dirname "$0")/../.."

n="${1:-3000}"
clients="${2:-16}"
. contrib/bench/common.sh
bench_binary
work="$(mktemp -d "${TMPDIR:-/tmp}/idemhook-outbound-hang.XXXXXX")"
pid=""
hang_pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ -n "$hang_pid" ]; then
		kill "$hang_pid" 2>/dev/null || true
		wait "$hang_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

secret="whsec_outbound_bench_secret"

# A server that accepts, reads, and never answers.
python3 - "$work/hang.port" <<'PY' &
import socket, sys, threading, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(1024)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held = []
def hold(c):
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
while True:
    c, _ = s.accept()
    held.append(c)
    threading.Thread(target=hold, args=(c,), daemon=True).start()
PY
hang_pid=$!
for _ in $(seq 1 100); do
	[ -s "$work/hang.port" ] && break
	sleep 0.05
done
hang_port="$(cat "$work/hang.port")"

write_config() { # NAME WITH_OUTBOUND
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

[provider stripe]
type = stripe
secret = $secret
INI
	if [ "$2" = 1 ]; then
		cat >>"$work/$1.ini" <<INI

[outbound]
notify_url = http://127.0.0.1:$hang_port/notify
timeout = 30s
concurrency = 8
INI
	fi
}

# Orders to pay, written straight into the migrated database.
make_orders() { # NAME
	"$bin" -q -c "$work/$1.ini" migrate >/dev/null
	python3 - "$work/$1.db" "$n" <<'PY'
import sqlite3, sys, time
db, n = sys.argv[1], int(sys.argv[2])
now = int(time.time() * 1000)
c = sqlite3.connect(db)
c.executemany("INSERT INTO orders (id, amount, currency, created_at, updated_at) VALUES (?, 1000, 'USD', ?, ?)",
              ((f"ord_bench{i:015d}", now, now) for i in range(n)))
c.commit()
c.close()
PY
}

load() { # NAME OUTFILE
	python3 - "$(cat "$work/$1.port")" "$secret" "$clients" "$n" "$2" "$1" <<'PY'
import hashlib, hmac, http.client, json, sys, threading, time
port, secret, clients, n, out, tag = sys.argv[1:7]
port, clients, n = int(port), int(clients), int(n)
lat, errors, lock, nxt = [], [0], threading.Lock(), [0]

def client():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while True:
        with lock:
            i = nxt[0]
            nxt[0] += 1
        if i >= n:
            return
        now = int(time.time())
        order = f"ord_bench{i:015d}"
        body = json.dumps({"id": f"evt_{tag}_{i}", "object": "event", "created": now,
                           "type": "payment_intent.succeeded", "livemode": False,
                           "data": {"object": {"id": f"pi_bench_{i}", "object": "payment_intent",
                                               "amount": 1000, "amount_received": 1000, "currency": "usd",
                                               "status": "succeeded", "metadata": {"order_id": order}}}},
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
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        with lock:
            lat.append((time.perf_counter() - t0) * 1000.0)
            if not ok:
                errors[0] += 1

threads = [threading.Thread(target=client) for _ in range(clients)]
t0 = time.monotonic()
for t in threads:
    t.start()
for t in threads:
    t.join()
json.dump({"elapsed": time.monotonic() - t0, "lat": sorted(lat), "errors": errors[0]}, open(out, "w"))
PY
}

write_config hang 1
write_config plain 0
make_orders hang
make_orders plain

echo "phase hanging peer: $n paid callbacks, every notify call hangs..." >&2
start_daemon hang
load hang "$work/hang.json"
queued="$(python3 -c "import sqlite3;print(sqlite3.connect('file:$work/hang.db?mode=ro',uri=True).execute(\"SELECT count(*) FROM outbox WHERE status IN ('pending','delivering','retry_wait')\").fetchone()[0])")"
stop_daemon

echo "phase no outbound: the same load..." >&2
start_daemon plain
load plain "$work/plain.json"
stop_daemon

python3 - "$work/hang.json" "$work/plain.json" "$queued" <<'PY'
import json, sys
def pct(xs, p):
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))] if xs else float("nan")
hang, plain, queued = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
print(f"{'':16} {'callbacks':>10} {'cb/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>7}")
for name, r in (("hanging peer", hang), ("no outbound", plain)):
    xs = r["lat"]
    print(f"{name:16} {len(xs):>10} {len(xs) / r['elapsed']:>8.0f} {pct(xs, 50):>8.2f} {pct(xs, 99):>8.2f} "
          f"{(xs[-1] if xs else float('nan')):>8.2f} {r['errors']:>7}")
print(f"outbox rows still waiting on the hanging peer when the load ended: {queued}")
PY
echo
echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype "${TMPDIR:-/tmp}" | tail -1)"
echo "reproduce: contrib/bench/outbound_hang.sh $n $clients"
