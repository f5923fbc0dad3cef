#!/usr/bin/env bash
# replay_bench.sh: in-process replay throughput (captures/s) and peak RSS.
# Usage: [JOBS=N] contrib/bench/replay_bench.sh [CAPTURES]   (--jobs, default 64)
#
# Generates CAPTURES (default 10000) Stripe-signed capture files in ten day
# directories: payments for 100 orders, Stripe's retries of them, and events
# with no business effect. Replays one tenth into a fresh database, all of
# them into another fresh database (synchronous=FULL), then all of them again
# (every one a duplicate). Similar peak RSS for one tenth and for all shows
# that memory does not grow with the number of files.
set -euo pipefail
cd "$(dirname "$0")/../.."

n="${1:-10000}"
if [ "$n" -lt 1000 ]; then
	echo "replay_bench: use at least 1000 captures" >&2
	exit 64
fi
. contrib/bench/common.sh
bench_binary

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idemhook-replay-bench-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
secret=whsec_replay_bench_secret

# One config per database; the same provider instance and secret.
for db in tenth full; do
	cat >"$tmp/$db.ini" <<EOF
[store]
path = $tmp/$db.db
synchronous = full

[provider stripe]
type = stripe
secret = $secret
EOF
done

# 100 orders, created once; both databases start from this one.
for i in $(seq 1 100); do
	"$IDEMHOOK_BIN" -q -c "$tmp/full.ini" order create --amount 1999 --currency usd
done >"$tmp/orders.txt"
cp "$tmp/full.db" "$tmp/tenth.db"

python3 - "$tmp/spool" "$tmp/orders.txt" "$n" "$secret" <<'EOF'
import hashlib, hmac, json, os, sys, time
spool, orders_file, n, secret = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
orders = open(orders_file).read().split()
t0 = int(time.time()) - 10 * 86400
per_day = n // 10
for i in range(n):
    day = min(i // per_day, 9)
    ms = (t0 + day * 86400) * 1000 + i * 7
    if i < 2 * len(orders):
        o = orders[i % len(orders)]
        ev = {"id": "evt_pay_" + o, "object": "event", "created": ms // 1000,
              "type": "payment_intent.succeeded",
              "data": {"object": {"id": "pi_" + o, "object": "payment_intent", "amount": 1999,
                                  "amount_received": 1999, "currency": "usd",
                                  "metadata": {"order_id": o}}}}
    else:
        ev = {"id": "evt_other_%d" % i, "object": "event", "created": ms // 1000,
              "type": "customer.updated",
              "data": {"object": {"id": "cus_%d" % i, "object": "customer",
                                  "email": "customer%d@example.com" % i}}}
    body = json.dumps(ev, separators=(",", ":")).encode()
    t = ms // 1000
    sig = hmac.new(secret.encode(), b"%d." % t + body, hashlib.sha256).hexdigest()
    d = os.path.join(spool, "day%02d" % day)
    os.makedirs(d, exist_ok=True)
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (ms % 1000)
    head = ("idemhook-capture 1\nreceived-at: %s\nreceived-ms: %d\nprovider: stripe\npeer: 127.0.0.1\n"
            "body-length: %d\n\nPOST /hooks/stripe HTTP/1.1\r\nContent-Type: application/json\r\n"
            "Stripe-Signature: t=%d,v1=%s\r\n\r\n" % (at, ms, len(body), t, sig))
    with open(os.path.join(d, "%06d.cap" % i), "wb") as f:
        f.write(head.encode() + body)
EOF

# Runs one replay and prints captures, seconds, captures/s and peak RSS.
measure() {
	python3 - "$IDEMHOOK_BIN" "$@" <<'EOF'
import json, os, resource, subprocess, sys, time
argv = [sys.argv[1], "-q", "-c", sys.argv[2], "replay", "-q", "--json", "--jobs", os.environ.get("JOBS", "64")] + sys.argv[3:]
t = time.monotonic()
p = subprocess.run(argv, stdout=subprocess.PIPE)
wall = time.monotonic() - t
rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
s = json.loads(p.stdout)
print("%6d captures  %7.2f s  %8.0f captures/s  peak RSS %6.1f MiB  (new %d, duplicate %d, "
      "rejected %d, failed %d)" % (s["total"], wall, s["total"] / wall, rss_kib / 1024.0,
                                   s["new"], s["duplicate"], s["rejected"], s["failed"]))
EOF
}

echo "in-process replay, synchronous=FULL, --jobs ${JOBS:-64} (JOBS=1: one transaction per capture)"
printf 'one tenth, fresh db:     '
measure "$tmp/tenth.ini" "$tmp/spool/day00"
printf 'all, fresh db:           '
measure "$tmp/full.ini" "$tmp/spool"
printf 'all again (duplicates):  '
measure "$tmp/full.ini" "$tmp/spool"
echo
echo "machine: $(nproc) cores, $(uname -r), $(df -h --output=source,fstype "$tmp" | tail -1)"
echo "reproduce: contrib/bench/replay_bench.sh $n"
