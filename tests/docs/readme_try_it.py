#!/usr/bin/env python3
"""readme_try_it.py: runs every command block of the README's "Try it"
section as written, twice, against the demo daemon it starts, and checks what
the text promises each block prints.

The demo listens on 127.0.0.1:8080, as the README says. So that the test can
use that address whatever else runs on the machine, it runs in a network
namespace of its own (as root, or as a user through a user namespace); where
the kernel allows neither it uses the machine's port 8080 if free, else it
is skipped (exit 77). The commands run in a scratch directory where
build/receiver/cli/idemhook is the binary under test.
"""

import fcntl
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import namespaces

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
DEMO = ("127.0.0.1", 8080)
SKIP = 77


def fail(msg):
    print(f"FAIL - {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok - {msg}", flush=True)


def try_it_blocks(readme):
    """The ```sh blocks between '## Try it' and the next level-2 heading."""
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"^## Try it\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if m is None:
        fail("README.md has no '## Try it' section")
    blocks = re.findall(r"^```sh\n(.*?)^```", m.group(1), re.S | re.M)
    if not blocks:
        fail("the Try it section has no sh blocks")
    return blocks


def private_network():
    """Enters a network namespace with its loopback up. Returns True when it did."""
    if not namespaces.unshare(namespaces.CLONE_NEWNET):
        return False
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = struct.pack("16sh22x", b"lo", 0)
    flags = struct.unpack("16sh22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))
    s.close()
    return True


def port_free(addr):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_listening(proc, log, addr):
    for _ in range(300):
        try:
            socket.create_connection(addr, timeout=1).close()
            return
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    fail(f"the demo did not start: {open(log).read()}")


def wait_log(log, text, seconds=10):
    """True once text is in the file log, False after seconds without it."""
    deadline = time.monotonic() + seconds
    while True:
        if text in open(log).read():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def run_blocks(blocks, cwd, env):
    """All blocks in one shell, as one person types them in one terminal;
    returns each block's output."""
    script = ["set -euo pipefail"]
    for i, b in enumerate(blocks):
        script.append(f"echo '@@ block {i} @@'")
        script.append(b)
    r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0:
        fail(f"the Try it commands failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    parts = re.split(r"^@@ block (\d+) @@\n", r.stdout, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def answers(out):
    """curl -si output split into (head, body) pairs."""
    res = []
    for chunk in re.split(r"(?=^HTTP/1\.1 )", out, flags=re.M):
        if chunk.startswith("HTTP/1.1 "):
            head, _, body = chunk.replace("\r\n", "\n").partition("\n\n")
            res.append((head, body))
    return res


def check_run(n, blocks, outs):
    """What the README promises, block by block; returns the order ids seen."""
    seen = set()
    orders = []
    paid_body = None
    for i, b in enumerate(blocks):
        out = outs.get(i, "")
        if "Idempotency-Key" in b:
            a = answers(out)
            if len(a) != 2 or not all(h.startswith("HTTP/1.1 201") for h, _ in a):
                fail(f"run {n}: the order API block: two 201 answers expected:\n{out}")
            loc = [re.search(r"^Location: (/api/orders/ord_[a-z0-9]{26})$", h, re.M) for h, _ in a]
            if "Idempotent-Replayed" in a[0][0] or None in loc:
                fail(f"run {n}: the first order API answer is not a new order:\n{out}")
            if "Idempotent-Replayed: true" not in a[1][0] or a[1][1] != a[0][1] or \
                    loc[1].group(1) != loc[0].group(1):
                fail(f"run {n}: the second order API answer is not the first replayed:\n{out}")
            seen.add("order api")
        elif "curl" in b:
            a = answers(out)
            if len(a) != 2 or not all(h.startswith("HTTP/1.1 200") for h, _ in a):
                fail(f"run {n}: the openssl/curl block: two 200 answers expected:\n{out}")
            if '"outcome":"paid"' not in a[0][1] or "Idempotent-Replayed" in a[0][0]:
                fail(f"run {n}: the first curl answer is not a fresh payment:\n{out}")
            if "Idempotent-Replayed: true" not in a[1][0] or a[1][1] != a[0][1]:
                fail(f"run {n}: the second curl answer is not the first replayed:\n{out}")
            seen.add("curl")
        elif "order create" in b:
            ids = re.findall(r"^ord_[a-z0-9]{26}$", out, re.M)
            if len(ids) != 1:
                fail(f"run {n}: 'order create' should print its id:\n{out}")
            orders.append(ids[0])
            seen.add("order create")
        elif "simulate stripe payment" in b:
            if not out.startswith("HTTP 200\n") or '"outcome":"paid"' not in out or \
                    "Idempotent-Replayed" in out or orders[-1] not in out:
                fail(f"run {n}: simulate payment should print a fresh 200 'paid':\n{out}")
            paid_body = out.split("\n\n", 1)[1]
            seen.add("payment")
        elif "simulate stripe duplicate" in b:
            if not out.startswith("HTTP 200\n") or "Idempotent-Replayed: true" not in out or \
                    out.split("\n\n", 1)[1] != paid_body:
                fail(f"run {n}: the duplicate should get the stored answer, replayed:\n{out}")
            seen.add("duplicate")
        elif "simulate stripe refund" in b:
            if not out.startswith("HTTP 200\n") or '"outcome":"partially_refunded"' not in out:
                fail(f"run {n}: the partial refund should be applied:\n{out}")
            seen.add("refund")
        elif "order show" in b:
            if not re.search(r"^status:\s+paid$", out, re.M) or \
                    not re.search(r"^points:\s+19$", out, re.M):
                fail(f"run {n}: order show should say paid with 19 points:\n{out}")
            seen.add("order show")
        else:
            fail(f"run {n}: a Try it block this test does not know what to expect of:\n{b}")
    want = {"order create", "payment", "duplicate", "order show", "refund", "curl", "order api"}
    if seen != want:
        fail(f"run {n}: the Try it section lost steps: {sorted(want - seen)}")
    ok(f"run {n}: every Try it block printed what the text promises")
    return orders


def main():
    binary = os.environ.get("IDEMHOOK_BIN")
    root = os.environ.get("IDEMHOOK_SOURCE_ROOT")
    if not binary or not root:
        fail("IDEMHOOK_BIN and IDEMHOOK_SOURCE_ROOT must be set (meson test sets them)")
    blocks = try_it_blocks(os.path.join(root, "README.md"))
    if not private_network() and not port_free(DEMO):
        print("skipped: no network namespace, and 127.0.0.1:8080 is taken")
        return SKIP
    work = tempfile.mkdtemp(prefix="idemhook-readme-")
    os.makedirs(os.path.join(work, "build/receiver/cli"))
    os.symlink(os.path.abspath(binary), os.path.join(work, "build/receiver/cli/idemhook"))
    env = {k: v for k, v in os.environ.items() if k != "IDEMHOOK_CONFIG"}
    log_path = os.path.join(work, "demo.log")
    log = open(log_path, "wb")
    demo = subprocess.Popen(["build/receiver/cli/idemhook", "serve"], cwd=work, env=env,
                            stdout=log, stderr=log)
    try:
        wait_listening(demo, log_path, DEMO)
        # The daemon names its checkout page just after its listener is up:
        # a connection can come first (it did under ASan on a loaded machine).
        if not wait_log(log_path, "checkout page is http://127.0.0.1:8080/checkout"):
            fail("the demo's log does not name its checkout page")
        ok("the demo names its checkout page")
        first = check_run(1, blocks, run_blocks(blocks, work, env))
        second = check_run(2, blocks, run_blocks(blocks, work, env))
        if set(first) & set(second):
            fail("the second run reused an order of the first")
        ok("a second run is a new order with new event ids and gets the same answers")
    finally:
        demo.send_signal(signal.SIGTERM)
        try:
            rc = demo.wait(20)
        except subprocess.TimeoutExpired:
            demo.kill()
            rc = demo.wait()
        log.close()
    if rc != 0:
        fail(f"the demo exited with {rc}: {open(log_path).read()}")
    if os.environ.get("IDEMHOOK_KEEP_TMP") == "1":
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
