#!/usr/bin/env python3
"""disk_writeback.py: what the disk under TMPDIR takes to write back the
scattered pages a checkpoint leaves (issue 24).

Usage: contrib/bench/disk_writeback.py [FILE_MIB [ROUNDS]]
       (defaults: a 1024 MiB file, 3 rounds of each size)

Nothing of idemhook runs here. A checkpoint copies each page that commits
changed into the database file (1 KiB at a random place for a random key's
index leaf, with a million keys stored) and then syncs the file: the disk
writes back one 4 KiB file-system block per page, however little of it
changed. The script writes a FILE_MIB file under TMPDIR (in the page cache
and synced, as a database the daemon has been serving is), then, for
checkpoints of 500 to 12,000 pages, writes 1 KiB into that many distinct
4 KiB blocks at random and fdatasyncs, and prints the time of each part and
the blocks and megabytes per second the sync wrote back. A daemon at one
million stored callbacks writes back 23 to 27 KB per unique callback
(bench_hooks' disk/r): at N callbacks/s that is N x 25 KB/s of these
writes, beside the WAL's own (docs/benchmarks.md, "The large database's
loss: the B-tree and the disk").
"""
import os
import random
import sys
import tempfile
import time

SIZES = (500, 2000, 6000, 12000)


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if mib < 64 or rounds < 1:
        sys.exit("usage: disk_writeback.py [FILE_MIB >= 64 [ROUNDS >= 1]]")
    fd, path = tempfile.mkstemp(prefix="disk-writeback-", dir=os.environ.get("TMPDIR"))
    try:
        # 4 KiB at a time, as SQLite writes a database a page at a time: the
        # page cache then holds the file in 4 KiB folios. Written 1 MiB at a
        # time, Linux 6.18's ext4 caches it in large folios, and each 1 KiB
        # pwrite below took 8 to 26 us of CPU instead of 2.5 to 3.
        chunk = os.urandom(4096)
        for i in range((mib << 20) // 4096):
            os.pwrite(fd, chunk, i * 4096)
        os.fsync(fd)
        page = os.urandom(1024)
        blocks = (mib << 20) // 4096
        print("%d MiB file in %s; each line: N pages of 1 KiB at random places, each "
              "in its own 4 KiB block, then fdatasync" % (mib, os.path.dirname(path)))
        for n in SIZES:
            for _ in range(rounds):
                t0 = time.monotonic()
                for b in random.sample(range(blocks), n):
                    os.pwrite(fd, page, b * 4096 + 1024 * random.randrange(4))
                t1 = time.monotonic()
                os.fdatasync(fd)
                t2 = time.monotonic()
                print("%6d pages: pwrite %6.1f ms (%4.1f us each), fdatasync %6.1f ms = "
                      "%6.0f blocks/s, %4.0f MB/s written back"
                      % (n, (t1 - t0) * 1e3, (t1 - t0) * 1e6 / n, (t2 - t1) * 1e3,
                         n / (t2 - t1), n * 4096 / (t2 - t1) / 1e6))
    finally:
        os.close(fd)
        os.unlink(path)
    print("reproduce: TMPDIR=%s contrib/bench/disk_writeback.py %d %d"
          % (os.path.dirname(path), mib, rounds))


if __name__ == "__main__":
    main()
