#!/usr/bin/env python3
"""full_disk.py: on a database whose file system is full, `idemhook gc` and
`idemhook order create` say that the disk is full and what to do (free
space, then run the command again), not "busy or failing; run the same
command again", which does not help there; they change nothing, and once
space is freed the same gc deletes what it could not. The line gc prints
is the one docs/operations.md ("A full disk") shows.

The full disk is real: a 2 MiB tmpfs mounted in a mount namespace of the
test's own (as root, or through a user namespace), filled with a file
until the kernel answers ENOSPC. The database's -wal and -shm are kept by
a connection held open, as the running daemon keeps them. Skipped (77)
where no mount namespace can be made.
"""

import ctypes
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import namespaces

SKIP = 77
MS_REC = 16384
MS_PRIVATE = 1 << 18
RECORDS = 3000
FULL_GC = ("idemhook gc: the disk of the database is full; nothing was deleted. Free space on "
           "its file system first (see \"A full disk\" in docs/operations.md), then run the "
           "same command again.")
FULL_ORDER = ("idemhook order create: the disk of the database is full; no order was "
              "created. Free space on its file system first (see \"A full disk\" in "
              "docs/operations.md), then run the same command again.")


def fail(msg):
    print(f"FAIL - {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok - {msg}", flush=True)


def private_mounts():
    """Enters a mount namespace whose mounts are not shared back. True when it did."""
    if not namespaces.unshare(namespaces.CLONE_NEWNS):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0


def mount_tmpfs(path, size):
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0, f"size={size}".encode()) == 0


def fill(path):
    """Writes path until the file system has no room left."""
    block = b"\0" * 4096
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError as e:
            if e.errno != 28:  # ENOSPC
                raise


def run(binary, config, *args):
    r = subprocess.run([binary, "-c", config, *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def records(db):
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as q:
        return q.execute("SELECT count(*) FROM idempotency_records").fetchone()[0]


def main():
    binary = os.environ.get("IDEMHOOK_BIN")
    if not binary:
        fail("IDEMHOOK_BIN is not set (run through meson test)")
    root = os.environ.get("IDEMHOOK_SOURCE_ROOT") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    docs = open(os.path.join(root, "docs", "operations.md"), encoding="utf-8").read()
    if not private_mounts():
        print("SKIP - no mount namespace can be made here")
        sys.exit(SKIP)
    scratch = tempfile.mkdtemp(prefix="idemhook-full-disk-")
    mnt = os.path.join(scratch, "mnt")
    os.mkdir(mnt)
    if not mount_tmpfs(mnt, "2m"):
        print("SKIP - no tmpfs can be mounted here")
        sys.exit(SKIP)
    held = None
    try:
        db = os.path.join(mnt, "idemhook.db")
        config = os.path.join(scratch, "idemhook.ini")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"[server]\nlisten = 127.0.0.1:0\n\n[store]\npath = {db}\n\n"
                    "[provider stripe]\ntype = stripe\nsecret = whsec_full_disk\n")
        rc, out, err = run(binary, config, "migrate")
        if rc != 0:
            fail(f"migrate exited {rc}:\n{out}{err}")
        with sqlite3.connect(db) as q:
            q.executemany("INSERT INTO idempotency_records (scope, idem_key, status, fingerprint, "
                          "reply_status, created_at, updated_at) "
                          "VALUES ('stripe', ?, 'done', x'00', 200, ?, ?)",
                          [(f"evt_full_disk_{i:06d}", 1000 + i, 1000 + i)
                           for i in range(RECORDS)])
        held = sqlite3.connect(db)
        held.execute("SELECT count(*) FROM idempotency_records").fetchone()
        fill(os.path.join(mnt, "filler"))
        ok("the database's file system is full")

        rc, out, err = run(binary, config, "gc")
        if rc != 75 or FULL_GC not in err or "busy or failing" in err:
            fail(f"gc on a full disk exited {rc}, wanted 75 and \"{FULL_GC}\":\n{out}{err}")
        if records(db) != RECORDS:
            fail(f"gc on a full disk changed the records: {records(db)} of {RECORDS}")
        ok("gc says the disk is full and what to do, exit 75, nothing deleted")

        rc, out, err = run(binary, config, "order", "create", "--amount", "100",
                           "--currency", "EUR")
        if rc != 75 or FULL_ORDER not in err or out != "":
            fail(f"order create on a full disk exited {rc}, wanted 75 and \"{FULL_ORDER}\":\n"
                 f"{out}{err}")
        ok("order create says the disk is full, exit 75")

        if FULL_GC not in docs:
            fail(f"docs/operations.md does not show the line gc prints:\n{FULL_GC}")
        ok("docs/operations.md shows the line gc prints")

        os.unlink(os.path.join(mnt, "filler"))
        rc, out, err = run(binary, config, "gc")
        if rc != 0 or f"idempotency records  {RECORDS:12d}" not in out:
            fail(f"gc after space was freed exited {rc}:\n{out}{err}")
        if records(db) != 0:
            fail(f"gc after space was freed left {records(db)} records")
        ok("with space freed, the same gc deletes them all")

        # A database with no -wal or -shm yet (restored from a backup, say)
        # on a full disk: the command's own open is what meets it, before
        # any write of its own.
        held.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        held.close()
        held = None
        for side in ("-wal", "-shm"):
            if os.path.exists(db + side):
                os.unlink(db + side)
        fill(os.path.join(mnt, "filler"))
        rc, out, err = run(binary, config, "order", "create", "--amount", "100",
                           "--currency", "EUR")
        said = ("idemhook order: the disk of the database is full; the database was "
                "not opened, and nothing changed. Free space on its file system first (see "
                "\"A full disk\" in docs/operations.md), then run the same command again.")
        if rc != 75 or said not in err:
            fail(f"order create opening a database on a full disk exited {rc}, wanted 75 and "
                 f"\"{said}\":\n{out}{err}")
        ok("a command whose open meets the full disk says so, exit 75")
    finally:
        if held is not None:
            held.close()
        ctypes.CDLL(None).umount2(mnt.encode(), 2)  # MNT_DETACH
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
