#!/usr/bin/env python3
"""wal_syncs.py: what the store's writer waits for in the fdatasync of its WAL.

Usage:
  perf record -a -o syncs.data -e block:block_rq_issue \\
      -e syscalls:sys_enter_fdatasync -e syscalls:sys_exit_fdatasync \\
      -e syscalls:sys_enter_pwrite64 -- COMMAND
  perf script -i syncs.data --comms store-writer > syncs.txt
  contrib/bench/wal_syncs.py syncs.txt

  contrib/bench/wal_syncs.py --probe DIR

With a trace (COMMAND is a bench_hooks run, which starts the daemon):
splits the writer's syncs of its WAL (the file it syncs most often) by
whether the block layer saw a metadata request (REQ_META, "M" in the
request's flags) issued from within the sync, and by whether the commit
wrote past the WAL's end so far (the file grew), and prints the count,
mean and median of each.

With --probe: writes 80 KB over blocks already written in a file in DIR and
syncs it, 300 times back to back, then 300 times with a pause of PAUSE ms
(default 6: longer than a kernel tick at HZ=250) before each write, and
prints the time of the syncs. A file system that writes the inode at a
sync after a timestamp changed (ext4 without a journal) shows the paused
syncs slower; `perf record -e block:block_rq_issue` around it shows one
metadata request per paused sync (docs/benchmarks.md, issue 24, fourteenth
round).
"""
import collections
import os
import re
import sys
import time

EVENT = re.compile(r"\s*store-writer\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)")


def stats(values):
    if not values:
        return "none"
    values = sorted(values)
    mean = sum(values) / len(values)
    return "%5d syncs, mean %.3f ms, median %.3f ms" % (
        len(values), mean, values[len(values) // 2])


def trace(path):
    events = []
    fds = collections.Counter()
    with open(path) as f:
        for line in f:
            m = EVENT.match(line)
            if not m:
                continue
            tid, t, name, rest = m.group(1), float(m.group(2)), m.group(3), m.group(4)
            events.append((tid, t, name, rest))
            if name == "syscalls:sys_enter_fdatasync":
                fds[rest.split()[-1]] += 1
    if not fds:
        sys.exit("wal_syncs: no fdatasync of store-writer in " + path)
    wal = int(fds.most_common(1)[0][0], 16)
    ends = {}
    high = {}
    cur = {}
    syncs = []
    for tid, t, name, rest in events:
        if name == "syscalls:sys_enter_pwrite64":
            m = re.search(r"fd: (0x[0-9a-f]+), .*count: (0x[0-9a-f]+), pos: (0x[0-9a-f]+)", rest)
            if m and int(m.group(1), 16) == wal:
                end = int(m.group(3), 16) + int(m.group(2), 16)
                ends[tid] = max(ends.get(tid, 0), end)
        elif name == "syscalls:sys_enter_fdatasync" and int(rest.split()[-1], 16) == wal:
            end = ends.pop(tid, 0)
            grew = end > high.get(tid, 0)
            high[tid] = max(high.get(tid, 0), end)
            cur[tid] = {"t": t, "grew": grew, "meta": False}
        elif name == "block:block_rq_issue" and tid in cur:
            if "M" in rest.split()[1]:
                cur[tid]["meta"] = True
        elif name == "syscalls:sys_exit_fdatasync" and tid in cur:
            s = cur.pop(tid)
            s["ms"] = (t - s["t"]) * 1000.0
            syncs.append(s)
    print("the writer's syncs of its WAL (fd %d):" % wal)
    print("  %-40s%s" % ("all", "") + stats([s["ms"] for s in syncs]))
    for grew in (False, True):
        for meta in (False, True):
            label = "%s, %s" % ("the file grew" if grew else "over written blocks",
                                "a metadata write" if meta else "data only")
            print("  %-40s%s" % (label, stats([s["ms"] for s in syncs
                                               if s["grew"] == grew and s["meta"] == meta])))


def probe(directory, pause_ms):
    path = os.path.join(directory, "wal_syncs.probe")
    size = 80 * 1024
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.pwrite(fd, b"\0" * (size * 300), 0)
        os.fsync(fd)
        data = os.urandom(size)
        for pause in (0.0, pause_ms / 1000.0):
            times = []
            for i in range(300):
                if pause:
                    time.sleep(pause)
                os.pwrite(fd, data, i * size)
                t = time.perf_counter()
                os.fdatasync(fd)
                times.append((time.perf_counter() - t) * 1000.0)
            print("pause %4.1f ms before each write: %s" % (pause * 1000.0, stats(times)))
    finally:
        os.close(fd)
        os.unlink(path)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--probe":
        probe(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 6.0)
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        trace(sys.argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
