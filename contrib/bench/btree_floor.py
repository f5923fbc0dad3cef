#!/usr/bin/env python3
"""btree_floor.py: what a million stored keys cost SQLite itself (issue 24).

Usage: contrib/bench/btree_floor.py [STORED [N [BATCH]]]
       (defaults: 1000000 stored, 20000 inserted, 16 per transaction;
       BTREE_PAGE_SIZE, BTREE_CACHE_KIB and BTREE_MMAP_MIB, default 1024,
       4096 and 0, try other settings)

Nothing of idemhook runs here: two databases under TMPDIR with the two
random-key unique indexes a unique callback inserts into, as idemhook's
schema has them (idempotency_records (scope, idem_key) beside a row of
about 700 bytes, order_refs (provider, ref)), idemhook's settings (1 KiB
pages, WAL, synchronous = FULL, a 4 MiB page cache, a checkpoint every
12,000 frames). One database is empty, the other holds STORED rows in each
table, inserted in random key order with the indexes in place (so their
leaves fill and split as a serving daemon's do). Then N new rows with
random keys (a Stripe event id, a payment id) go into each database, BATCH
per transaction and a savepoint per row, as the writer does, and the
script prints rows/s, CPU per row and the bytes handed to write/pwrite per
row (wchar of /proc/self/io: WAL frames and checkpoints), and the ratio of
the full database to the empty one: the share of the empty database's
rate that a B-tree of this page size keeps at STORED, whatever runs around
it (docs/benchmarks.md, "A large database whose keys interleave").
"""
import os
import shutil
import sqlite3
import sys
import tempfile
import time

PAGE_SIZE = int(os.environ.get("BTREE_PAGE_SIZE", "1024"))
CACHE_KIB = int(os.environ.get("BTREE_CACHE_KIB", "4096"))
MMAP_MIB = int(os.environ.get("BTREE_MMAP_MIB", "0"))

SCHEMA = """
CREATE TABLE records (id INTEGER PRIMARY KEY, scope TEXT NOT NULL,
                      idem_key TEXT NOT NULL, body BLOB);
CREATE UNIQUE INDEX records_key ON records (scope, idem_key);
CREATE TABLE refs (id INTEGER PRIMARY KEY, provider TEXT NOT NULL,
                   ref TEXT NOT NULL, order_id TEXT NOT NULL);
CREATE UNIQUE INDEX refs_ref ON refs (provider, ref);
"""

FILL = """
WITH RECURSIVE c(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM c WHERE j < ?)
INSERT INTO {table} ({cols})
SELECT 'stripe', '{tag}' || lower(hex(randomblob(8))) || '_fill_' || j, {last} FROM c
"""


def wchar():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def make(path, stored):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA page_size = %d" % PAGE_SIZE)
    db.executescript(SCHEMA)
    if stored > 0:
        # No journal while filling: the rows are the point, not their safety.
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA cache_size = -262144")
        db.execute("BEGIN")
        db.execute(FILL.format(table="records", cols="scope, idem_key, body", tag="evt_",
                               last="randomblob(700)"), (stored,))
        db.execute(FILL.format(table="refs", cols="provider, ref, order_id", tag="pi_",
                               last="'ord_' || lower(hex(randomblob(13)))"), (stored,))
        db.execute("COMMIT")
    db.execute("PRAGMA journal_mode = WAL")
    db.close()
    os.sync()


def insert(path, n, batch, tag):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA cache_size = -%d" % CACHE_KIB)
    db.execute("PRAGMA mmap_size = %d" % (MMAP_MIB << 20))
    db.execute("PRAGMA wal_autocheckpoint = 12000")
    rows = [("evt_%s_%s_%d" % (os.urandom(8).hex(), tag, i),
             "pi_%s_%s_%d" % (os.urandom(8).hex(), tag, i),
             os.urandom(700), "ord_" + os.urandom(13).hex()) for i in range(n)]
    w0 = wchar()
    c0 = time.process_time()
    t0 = time.monotonic()
    for start in range(0, n, batch):
        db.execute("BEGIN IMMEDIATE")
        for key, ref, body, order in rows[start:start + batch]:
            db.execute("SAVEPOINT claim")
            db.execute("INSERT INTO records (scope, idem_key, body) VALUES ('stripe', ?, ?)",
                       (key, body))
            db.execute("INSERT INTO refs (provider, ref, order_id) VALUES ('stripe', ?, ?)",
                       (ref, order))
            db.execute("RELEASE claim")
        db.execute("COMMIT")
    seconds = time.monotonic() - t0
    cpu = time.process_time() - c0
    written = wchar() - w0
    db.close()
    return n / seconds, cpu * 1e6 / n, written / n / 1024


def main():
    stored = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    tmp = tempfile.mkdtemp(prefix="btree-floor-", dir=os.environ.get("TMPDIR", "/tmp"))
    try:
        empty = os.path.join(tmp, "empty.db")
        full = os.path.join(tmp, "full.db")
        make(empty, 0)
        t0 = time.monotonic()
        make(full, stored)
        print("filled %d rows in each table in %.1f s (SQL, no journal)" %
              (stored, time.monotonic() - t0))
        # Empty, full, empty, full: a neighbour's load falls on both sides.
        got = {"empty": [], "full": []}
        for rnd in range(2):
            for name, path in (("empty", empty), ("full", full)):
                rate, cpu_us, kb = insert(path, n // 2, batch, "%s%d" % (name, rnd))
                got[name].append((rate, cpu_us, kb))
                print("%-5s round %d: %8.0f rows/s  %6.1f us CPU a row  %6.2f KB to write/pwrite a row"
                      % (name, rnd + 1, rate, cpu_us, kb))
        e = sum(r for r, _, _ in got["empty"]) / len(got["empty"])
        f = sum(r for r, _, _ in got["full"]) / len(got["full"])
        print("\n%d stored / empty: %.2f (rows/s, %d per transaction, a savepoint per row, "
              "synchronous=FULL, %d-byte pages, %d KiB cache, %d MiB mapped)"
              % (stored, f / e, batch, PAGE_SIZE, CACHE_KIB, MMAP_MIB))
        print("reproduce: BTREE_PAGE_SIZE=%d BTREE_CACHE_KIB=%d BTREE_MMAP_MIB=%d "
              "contrib/bench/btree_floor.py %d %d %d"
              % (PAGE_SIZE, CACHE_KIB, MMAP_MIB, stored, n, batch))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
