#!/usr/bin/env python3
# demo-captures.py: writes idemhook capture files for one demo order, signed
# with the demo Stripe secret, as the daemon would have captured them: a
# payment, Stripe's retry of the same payment, and a partial refund.
#
# usage: contrib/captures/demo-captures.py ORDER_ID [OUTDIR] [--amount 1999]
#        [--currency usd] [--secret S] [--at UNIX_SECONDS]
#
# The files are plain text (docs/capture-replay.md): look at them, then
# `idemhook replay OUTDIR`.
import argparse
import hashlib
import hmac
import json
import os
import sys
import time

DEMO_SECRET = "whsec_idemhook_demo_secret_do_not_use_in_production"


def capture_text(provider, received_ms, headers, body):
    """The capture file format, version 1."""
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(received_ms // 1000))
    meta = [
        "idemhook-capture 1",
        "received-at: %s.%03dZ" % (at, received_ms % 1000),
        "received-ms: %d" % received_ms,
        "provider: %s" % provider,
        "peer: 127.0.0.1",
        "client: 127.0.0.1",
        "rejected: no",
        "body-length: %d" % len(body),
        "body-sha256: %s" % hashlib.sha256(body).hexdigest(),
    ]
    head = "POST /hooks/%s HTTP/1.1\r\n" % provider
    head += "".join("%s: %s\r\n" % (k, v) for k, v in headers) + "\r\n"
    return ("\n".join(meta) + "\n\n" + head).encode() + body


def stripe_event(event_id, created, etype, obj):
    return json.dumps({
        "id": event_id, "object": "event", "api_version": "2024-06-20",
        "created": created, "type": etype, "livemode": False,
        "pending_webhooks": 1, "request": {"id": None, "idempotency_key": None},
        "data": {"object": obj},
    }, separators=(",", ":")).encode()


def write_capture(outdir, provider, received_ms, seq, secret, body):
    t = received_ms // 1000
    mac = hmac.new(secret.encode(), b"%d." % t + body, hashlib.sha256).hexdigest()
    headers = [
        ("Host", "127.0.0.1:8080"),
        ("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
        ("Content-Type", "application/json; charset=utf-8"),
        ("Content-Length", str(len(body))),
        ("Stripe-Signature", "t=%d,v1=%s" % (t, mac)),
    ]
    day = time.strftime("%Y-%m-%d", time.gmtime(t))
    name = time.strftime("%H%M%S", time.gmtime(t)) + ".%03d-%s-demo-%06d.cap" % (
        received_ms % 1000, provider, seq)
    os.makedirs(os.path.join(outdir, day), mode=0o700, exist_ok=True)
    path = os.path.join(outdir, day, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(capture_text(provider, received_ms, headers, body))
    return path


def main():
    ap = argparse.ArgumentParser(description="Writes demo capture files for one order.")
    ap.add_argument("order_id")
    ap.add_argument("outdir", nargs="?", default="var/demo-captures")
    ap.add_argument("--amount", type=int, default=1999)
    ap.add_argument("--currency", default="usd")
    ap.add_argument("--secret", default=DEMO_SECRET)
    ap.add_argument("--provider", default="stripe")
    ap.add_argument("--at", type=int, default=int(time.time()))
    a = ap.parse_args()

    order, amount, cur = a.order_id, a.amount, a.currency
    # "$(idemhook order create ...)" is empty when the command failed:
    # captures for order "" would only be refused at replay, far from the cause.
    if order.strip() == "":
        ap.error("the order id is empty: did `idemhook order create` fail? "
                 "Pass the id it printed (ord_...)")
    if any(c.isspace() or not c.isprintable() for c in order):
        ap.error("the order id %r holds white space or control characters: "
                 "pass the id `idemhook order create` printed (ord_...)" % order)
    suffix = order[-8:]
    pay = stripe_event("evt_demo_pay_" + suffix, a.at, "payment_intent.succeeded", {
        "id": "pi_demo_" + suffix, "object": "payment_intent", "amount": amount,
        "amount_received": amount, "currency": cur, "status": "succeeded",
        "metadata": {"order_id": order}})
    refund_amount = amount // 4
    refund = stripe_event("evt_demo_refund_" + suffix, a.at + 60, "charge.refunded", {
        "id": "ch_demo_" + suffix, "object": "charge", "amount": amount,
        "amount_refunded": refund_amount, "currency": cur, "payment_intent": "pi_demo_" + suffix,
        "refunded": False, "metadata": {"order_id": order},
        "refunds": {"object": "list", "data": [
            {"id": "re_demo_" + suffix, "object": "refund", "amount": refund_amount}]}})
    ms = a.at * 1000
    paths = [
        write_capture(a.outdir, a.provider, ms + 120, 1, a.secret, pay),
        # Stripe retries when it did not see the 2xx in time: the same event.
        write_capture(a.outdir, a.provider, ms + 31200, 2, a.secret, pay),
        write_capture(a.outdir, a.provider, ms + 60250, 3, a.secret, refund),
    ]
    for p in paths:
        print(p)


if __name__ == "__main__":
    sys.exit(main())
