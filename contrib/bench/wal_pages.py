#!/usr/bin/env python3
"""wal_pages.py: which b-tree each page in a SQLite WAL belongs to.

Usage: contrib/bench/wal_pages.py DATABASE

Reads DATABASE-wal (the frames since the WAL last started over), copies the
database and its WAL aside, and names each frame's page with the dbstat
virtual table: the table or index it is a leaf of, "(internal)" for an
interior page, "?free/ptrmap" for the free list and auto_vacuum's pointer
maps. Prints frames per commit for each, most first: what one commit
writes, and so, divided by the callbacks of a commit, the pages a callback
costs (docs/benchmarks.md, "Bytes per callback"). Run it on a database the
daemon was killed on (bench_hooks with IDEMHOOK_KEEP_TMP=1 keeps them).
"""
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: wal_pages.py DATABASE")
    db = sys.argv[1]
    with open(db + "-wal", "rb") as f:
        wal = f.read()
    if len(wal) < 32:
        sys.exit("wal_pages.py: no WAL frames")
    _magic, _version, page_size, _seq, salt1, salt2 = struct.unpack(">IIIIII", wal[:24])
    frames = []
    off = 32
    while off + 24 + page_size <= len(wal):
        pgno, commit, s1, s2 = struct.unpack(">IIII", wal[off:off + 16])
        if (s1, s2) != (salt1, salt2):
            break  # a frame of the WAL before it started over
        frames.append((pgno, commit))
        off += 24 + page_size
    commits = sum(1 for _, commit in frames if commit)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "copy.db")
        shutil.copy(db, copy)
        shutil.copy(db + "-wal", copy + "-wal")
        conn = sqlite3.connect(copy)
        names = {}
        for name, pageno, pagetype in conn.execute("SELECT name, pageno, pagetype FROM dbstat"):
            names[pageno] = name + ("" if pagetype == "leaf" else "(%s)" % pagetype)
        conn.close()
    count = collections.Counter(names.get(p, "?free/ptrmap") for p, _ in frames)
    print("page size %d, %d frames, %d commits" % (page_size, len(frames), commits))
    for name, n in count.most_common():
        print("%7d %7.1f per commit  %s" % (n, n / max(commits, 1), name))


if __name__ == "__main__":
    main()
