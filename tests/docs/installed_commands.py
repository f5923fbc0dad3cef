#!/usr/bin/env python3
"""installed_commands.py: every idemhook command that docs/operations.md and
the alert annotations (contrib/monitoring/idemhook.rules.yml) tell an
operator to run works, as written, on an installed layout.

The build is installed with `meson install --destdir` into a scratch
directory. The configuration is the installed example, copied to the path
the installed unit's ExecStart= names (-c), with the paths the unit gives
the service (StateDirectory /var/lib/idemhook) made relative to the scratch
directory. The daemon runs as the unit runs it: `serve -c CONFIG` in its
WorkingDirectory, the secrets of its LoadCredential= lines under
$CREDENTIALS_DIRECTORY. Each documented command then runs with the
installed binary, by hand as an operator would (no $CREDENTIALS_DIRECTORY;
the commands that read secrets find them where the running service's
credentials are, as /run/credentials/idemhook.service would be), first
while the daemon serves, then again with it stopped. A command fails the
test when it exits with a usage, configuration, unavailable or internal
error (64, 69, 70, 77, 78), a signal, or prints an error line; 1 and 65, the
documented answers of `events reprocess` for an event that stays failed (1)
or is not failed (65), are answers, not errors. curl asks the running daemon
only.

Runs in a network namespace of its own (as root, or through a user
namespace) so that the documented ports (8080, 8491) are free; skipped
(77) where neither is possible and they are taken.
"""

import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_try_it import private_network  # noqa: E402

SKIP = 77
BAD_EXIT = {64, 69, 70, 77, 78, 126, 127}
SECRET = "whsec_installed_layout_test_secret"
SECRET_COMMANDS = ("reconcile", "replay", "simulate", "reprocess")


def fail(msg):
    print(f"FAIL - {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok - {msg}", flush=True)


def source_root():
    return os.environ.get("IDEMHOOK_SOURCE_ROOT") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_dir():
    binary = os.environ.get("IDEMHOOK_BIN")
    if not binary:
        fail("IDEMHOOK_BIN is not set (run through meson test)")
    return os.path.dirname(os.path.dirname(os.path.dirname(binary)))


def install(dest):
    meson = shutil.which("meson")
    if meson is None:
        fail("meson is not on PATH")
    r = subprocess.run([meson, "install", "-C", build_dir(), "--destdir", dest, "--no-rebuild",
                        "--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"meson install --destdir failed: {r.stdout}{r.stderr}")


def find_installed(dest, name):
    for root, _dirs, files in os.walk(dest):
        if name in files:
            return os.path.join(root, name)
    fail(f"{name} was not installed")
    return None


def unit_settings(unit_path):
    text = open(unit_path, encoding="utf-8").read()
    m = re.search(r"^ExecStart=(\S+) serve -c (\S+)$", text, re.M)
    if m is None:
        fail("the installed unit has no 'ExecStart=BIN serve -c CONFIG'")
    wd = re.search(r"^WorkingDirectory=(\S+)$", text, re.M)
    creds = re.findall(r"^LoadCredential=([^:\s]+):", text, re.M)
    return m.group(1), m.group(2), wd.group(1) if wd else "/", creds


def commands_of_docs():
    """The idemhook and curl command lines of docs/operations.md (code
    blocks and inline code) and of the alert annotations."""
    root = source_root()
    ops = open(os.path.join(root, "docs/operations.md"), encoding="utf-8").read()
    rules = open(os.path.join(root, "contrib/monitoring/idemhook.rules.yml"), encoding="utf-8").read()
    found = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", ops, re.S | re.M):
        # A transcript ("$ command", then its output): only its $ lines.
        transcript = any(l.startswith("$ ") for l in block.splitlines())
        for line in block.splitlines():
            line = line.strip()
            if transcript and not line.startswith("$ "):
                continue
            line = re.sub(r"^\$ ", "", line)
            line = re.sub(r"^sudo ", "", line)
            if re.match(r"idemhook (-c \S+ )?[a-z]", line) or re.match(r"curl .*127\.0\.0\.1", line):
                found.append(("docs/operations.md", line))
    for text, where in ((ops, "docs/operations.md"), (rules, "contrib/monitoring/idemhook.rules.yml")):
        # Headings name commands as topics ("## Failed events: `idemhook events`").
        prose = "\n".join(l for l in text.splitlines() if not l.startswith("#"))
        for code in re.findall(r"`([^`\n]+)`", prose):
            if re.match(r"idemhook (-c \S+ )?[a-z]+( |$)", code) and code.split()[1] not in ("serve",):
                found.append((where, code))
    seen = set()
    out = []
    for where, c in found:
        if c not in seen:
            seen.add(c)
            out.append((where, c))
    return out


def concrete(cmd, ctx):
    """cmd as run on the box: comments dropped, optional [parts] given,
    placeholders filled, the installed binary and configuration."""
    cmd = re.sub(r"\s+#.*$", "", cmd)
    cmd = re.sub(r"\[(--[^\]]+)\]", r"\1", cmd)
    cmd = cmd.replace("{{ $labels.provider }}", "stripe")
    cmd = re.sub(r"\b(ID|1234)\b", str(ctx["event_id"]), cmd)
    cmd = cmd.replace("/etc/idemhook/idemhook.ini", ctx["config"])
    words = cmd.split()
    if words[0] == "idemhook":
        words[0] = ctx["bin"]
        if "-c" not in words:
            words[1:1] = ["-c", ctx["config"]]
    return words


def stripe_callback(port, event_id, order_id):
    body = json.dumps({
        "id": event_id, "object": "event", "type": "payment_intent.succeeded",
        "created": int(time.time()), "livemode": False,
        "data": {"object": {"id": "pi_" + event_id, "object": "payment_intent", "amount": 1999,
                            "amount_received": 1999, "currency": "usd", "status": "succeeded",
                            "metadata": {"order_id": order_id}}}})
    t = str(int(time.time()))
    sig = hmac.new(SECRET.encode(), f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/stripe", data=body.encode(),
                                 headers={"Content-Type": "application/json",
                                          "Stripe-Signature": f"t={t},v1={sig}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def wait_port(port, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def run_all(cmds, ctx, env, cwd, phase):
    failed = []
    for where, cmd in cmds:
        words = concrete(cmd, ctx)
        if words[0] == "curl" and phase != "serving":
            continue
        run_env = dict(env)
        if any(w in SECRET_COMMANDS for w in words):
            run_env["CREDENTIALS_DIRECTORY"] = ctx["creds"]
        r = subprocess.run(words, cwd=cwd, env=run_env, capture_output=True, text=True, timeout=120)
        out = r.stdout + r.stderr
        error_line = next((l for l in out.splitlines() if l.startswith("<3>")), None)
        if r.returncode in BAD_EXIT or r.returncode < 0 or error_line is not None:
            failed.append(f"{where}: `{cmd}` ({phase}) exited {r.returncode}:\n{out}")
        else:
            ok(f"{phase}: {cmd} (exit {r.returncode})")
    return failed


def main():
    if not private_network():
        for port in (8080, 8491):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    print(f"SKIP - port {port} is taken and no network namespace is possible")
                    sys.exit(SKIP)
    scratch = tempfile.mkdtemp(prefix="idemhook-installed-")
    daemon = None
    try:
        dest = os.path.join(scratch, "dest")
        install(dest)
        unit = find_installed(dest, "idemhook.service")
        binary, config, workdir, cred_names = unit_settings(unit)
        ctx = {"bin": dest + binary, "config": dest + config}
        example = find_installed(dest, "idemhook.example.ini")
        state = dest + workdir
        os.makedirs(state, mode=0o700)
        text = open(example, encoding="utf-8").read()
        text = text.replace(workdir + "/", state + "/")
        with open(ctx["config"], "w", encoding="utf-8") as f:
            f.write(text)
        ctx["creds"] = os.path.join(scratch, "credentials")
        os.makedirs(ctx["creds"], mode=0o700)
        if not cred_names:
            fail("the installed unit has no LoadCredential= line")
        for name in cred_names:
            with open(os.path.join(ctx["creds"], name), "w", encoding="utf-8") as f:
                f.write(SECRET + "\n")
        ok(f"installed into {dest}: {binary}, -c {config}, credentials {', '.join(cred_names)}")

        env = {k: v for k, v in os.environ.items()
               if k not in ("CREDENTIALS_DIRECTORY", "IDEMHOOK_CONFIG")}
        denv = dict(env, CREDENTIALS_DIRECTORY=ctx["creds"])
        log = open(os.path.join(scratch, "daemon.log"), "w")
        daemon = subprocess.Popen([ctx["bin"], "serve", "-c", ctx["config"]], cwd=state, env=denv,
                                  stdout=log, stderr=subprocess.STDOUT)
        if not wait_port(8080) or not wait_port(8491):
            fail("the installed daemon did not listen on 8080 and 8491:\n" +
                 open(os.path.join(scratch, "daemon.log")).read())
        ok("the installed daemon serves on 127.0.0.1:8080, admin on 127.0.0.1:8491")

        # Something for the commands to find: an order, its payment, and a
        # callback for an unknown order (a failed event).
        r = subprocess.run([ctx["bin"], "-c", ctx["config"], "order", "create", "--amount", "1999",
                            "--currency", "usd"], cwd=state, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"order create: {r.stdout}{r.stderr}")
        order = r.stdout.strip()
        if stripe_callback(8080, "evt_installed_paid", order) != 200 or \
                stripe_callback(8080, "evt_installed_unknown", "ord_unknown") != 200:
            fail("the callbacks were not acknowledged")
        db = os.path.join(state, "idemhook.db")
        if not os.path.exists(db):
            fail(f"no database at {db}")
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as q:
            row = q.execute("SELECT id FROM events WHERE outcome = 'failed' ORDER BY id").fetchone()
        if row is None:
            fail("the callback for an unknown order left no failed event")
        ctx["event_id"] = row[0]

        cmds = commands_of_docs()
        if len(cmds) < 8:
            fail(f"only {len(cmds)} commands found in the docs")
        failed = run_all(cmds, ctx, env, state, "serving")
        daemon.send_signal(signal.SIGTERM)
        if daemon.wait(timeout=60) != 0:
            failed.append("the daemon did not stop with status 0")
        daemon = None
        failed += run_all(cmds, ctx, env, state, "stopped")
        if failed:
            for f in failed:
                print(f"FAIL - {f}", flush=True)
            sys.exit(1)
        ok(f"{len(cmds)} documented commands ran, serving and stopped")
    finally:
        if daemon is not None:
            daemon.kill()
            daemon.wait()
        if os.environ.get("IDEMHOOK_KEEP_TMP") == "1":
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
