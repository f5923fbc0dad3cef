#!/usr/bin/env bash
# console_pages.sh: the operator console over a large database: how long each
# page takes on EVENTS events (default 1,000,000), and the callbacks' p50/p99
# latency under load with and without an operator browsing the console, in
# one run.
# Usage: contrib/bench/console_pages.sh [EVENTS] [CLIENTS] [SECONDS]
#
# The events (one in a thousand failed, three providers, over the last 22
# hours) and 200,000 orders are written straight into a fresh database at
# the current schema. Phase "quiet": CLIENTS keep-alive connections post
# unique signed Stripe callbacks for SECONDS. Phase "browsed": the same,
# while one client loads console pages back to back (overview, lists with
# filters, an event, an order). synchronous = full.
set -euo pipefail
cd "$(dirname "$0")/../.."

events="${1:-1000000}"
clients="${2:-8}"
seconds="${3:-20}"
. contrib/bench/common.sh
bench_binary
work="$(mktemp -d /tmp/idemhook-consolebench.XXXXXX)"
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

secret="whsec_console_bench_secret"
token="console-bench-operator-token-0123456789"
cat >"$work/c.ini" <<INI
[server]
listen = 127.0.0.1:0
port_file = $work/c.port
threads = 8

[store]
path = $work/c.db
synchronous = full

[admin]
listen = 127.0.0.1:0
port_file = $work/c.admin

[gc]
interval = 0

[provider stripe]
type = stripe
secret = $secret

[console]
enabled = yes
token = bench operator env:CONSOLE_BENCH_TOKEN
INI
"$bin" -q -c "$work/c.ini" migrate >/dev/null
echo "filling $events events..." >&2
python3 - "$work/c.db" "$events" <<'PY'
import sqlite3, sys, time
db, n = sys.argv[1], int(sys.argv[2])
now = int(time.time() * 1000)
c = sqlite3.connect(db)
c.execute("PRAGMA journal_mode=WAL")
c.executemany("INSERT INTO orders (id, amount, currency, status, created_at, updated_at)"
              " VALUES (?, 1000, 'USD', 'paid', ?, ?)",
              ((f"ord_bench{i:015d}", now - 86400000, now - 86400000) for i in range(1, 200001)))
payload = '{"id":"evt","object":"event","data":{"object":{"amount":1000,"currency":"usd"}}}'
batch = 50000
for start in range(1, n + 1, batch):
    c.executemany(
        # one row per key, with its event (migration 0012)
        "INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, created_at,"
        " updated_at, type, kind, order_ref, payment_ref, amount, currency,"
        " payload, outcome, effect, reason, received_at, processed_at)"
        " VALUES (?1, ?2, ?6, randomblob(32), ?9, ?9, 'payment_intent.succeeded',"
        " 'payment_succeeded', ?3, ?4, 1000, 'USD', ?5, ?6, ?7, ?8, ?9, ?10)",
        ((("stripe", "adyen", "alipay")[i % 3], f"evt_bench_{i:010d}",
          f"ord_bench{i % 200000 + 1:015d}", f"pi_{i}", payload,
          "failed" if i % 1000 == 0 else "done", None if i % 1000 == 0 else "paid",
          "unknown_order" if i % 1000 == 0 else None, now - (n - i) * 80, now - (n - i) * 80)
         for i in range(start, min(n + 1, start + batch))))
    c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
c.close()
PY
export CONSOLE_BENCH_TOKEN="$token"
start_daemon c
python3 - "$(cat "$work/c.port")" "$(cat "$work/c.admin")" "$secret" "$token" "$clients" "$seconds" "$events" <<'PY'
import hashlib, hmac, http.client, json, statistics, sys, threading, time, urllib.parse
port, admin, secret, token, clients, seconds, events = sys.argv[1:8]
port, admin, clients, seconds, events = int(port), int(admin), int(clients), float(seconds), int(events)

def login():
    conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=60)
    conn.request("POST", "/console/login", urllib.parse.urlencode({"token": token}),
                 {"Content-Type": "application/x-www-form-urlencoded"})
    r = conn.getresponse()
    r.read()
    return r.getheader("Set-Cookie").split(";")[0]

cookie = login()
pages = ["/console/", "/console/events", "/console/events?outcome=failed",
         "/console/events?provider=adyen&outcome=failed", "/console/events?open=1",
         "/console/events?key=evt_bench_00005", "/console/events?order=ord_bench000000000012345",
         f"/console/events?before={events // 2}", f"/console/events/{events * 7 // 9}",
         "/console/orders/ord_bench000000000012345", "/console/outbox", "/console/audit"]

def get(conn, page):
    t0 = time.perf_counter()
    conn.request("GET", page, headers={"Cookie": cookie})
    r = conn.getresponse()
    r.read()
    assert r.status == 200, (page, r.status)
    return (time.perf_counter() - t0) * 1000.0

conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=60)
print(f"console pages on {events} events (ms: median of 5, max):")
for page in pages:
    times = [get(conn, page) for _ in range(5)]
    print(f"  {statistics.median(times):8.1f} {max(times):8.1f}  {page}")

def load(tag, browse):
    stop = threading.Event()
    lat = [[] for _ in range(clients)]
    loads = [0]
    def client(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = 0
        while not stop.is_set():
            i += 1
            now = int(time.time())
            body = json.dumps({"id": f"evt_{tag}_{k}_{i}", "object": "event", "created": now,
                               "type": "customer.created", "livemode": True,
                               "data": {"object": {"id": "cus_bench", "object": "customer"}}},
                              separators=(",", ":")).encode()
            mac = hmac.new(secret.encode(), f"{now}.".encode() + body, hashlib.sha256).hexdigest()
            t0 = time.perf_counter()
            c.request("POST", "/hooks/stripe", body, {"Content-Type": "application/json",
                                                      "Stripe-Signature": f"t={now},v1={mac}"})
            r = c.getresponse()
            r.read()
            lat[k].append((time.perf_counter() - t0) * 1000.0)
    def browser():
        c = http.client.HTTPConnection("127.0.0.1", admin, timeout=60)
        while not stop.is_set():
            for page in pages:
                get(c, page)
                loads[0] += 1
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    if browse:
        threads.append(threading.Thread(target=browser))
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    all_lat = sorted(x for l in lat for x in l)
    p = lambda q: all_lat[min(len(all_lat) - 1, int(q * len(all_lat)))]
    print(f"{tag:8s} callbacks {len(all_lat):7d} ({len(all_lat) / seconds:7.0f}/s)  p50 {p(0.5):6.2f} ms"
          f"  p99 {p(0.99):6.2f} ms  console pages loaded {loads[0]}")

load("quiet", False)
load("browsed", True)
PY
stop_daemon
