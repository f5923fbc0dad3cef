#!/usr/bin/env python3
"""contrib/captures/demo-captures.py refuses an empty order id (what
"$(idemhook order create ...)" gives when the command failed) and writes
nothing, and writes the three captures for a real one."""
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("IDEMHOOK_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(ROOT, "contrib", "captures", "demo-captures.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def files_under(d):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for bad in ("", "  ", "error: no database\n"):
            out = os.path.join(tmp, "bad")
            r = run(bad, out)
            if r.returncode == 0:
                sys.exit("order id %r was accepted:\n%s" % (bad, r.stdout))
            if "order create" not in r.stderr:
                sys.exit("order id %r: the message does not point at order create:\n%s"
                         % (bad, r.stderr))
            if os.path.exists(out):
                sys.exit("order id %r: files were written: %s" % (bad, files_under(out)))
        out = os.path.join(tmp, "good")
        r = run("ord_demotest0000000001", out)
        if r.returncode != 0:
            sys.exit("a real order id was refused:\n%s" % r.stderr)
        caps = files_under(out)
        if len(caps) != 3:
            sys.exit("expected 3 captures, got %s" % caps)
        for c in caps:
            with open(c, "rb") as f:
                text = f.read()
            if not text.startswith(b"idemhook-capture 1\n") or b'"order_id":"ord_demotest0000000001"' not in text:
                sys.exit("%s is not a capture for the order:\n%r" % (c, text[:400]))
    print("ok")


if __name__ == "__main__":
    main()
