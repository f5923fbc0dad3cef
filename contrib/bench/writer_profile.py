#!/usr/bin/env python3
"""writer_profile.py: where the store's writer thread spends its samples.

Usage: perf script -i FILE --comm store-writer -F comm,ip,sym > writer.txt
       contrib/bench/writer_profile.py writer.txt

FILE is a `perf record --call-graph dwarf` of the daemon (bench_hooks with
BENCH_PERF=FILE BENCH_PERF_CALLGRAPH=dwarf,16384). Counts each sample of the
writer under the idemhook function that ran the SQL statement it was in
(the caller of store_exec/store_query; "store_writer_main commit" for
COMMIT), then the shares of a few costs across all of them: pread of pages
the page cache had dropped, the WAL's pwrite and fdatasync, SQLite's
temporary b-trees, malloc/free, and the b-tree descents and inserts
(docs/benchmarks.md, "The writer's CPU per unique callback").
"""
import collections
import sys

STORE_RUNNERS = {
    "store_sqlite_run",
    "store_exec",
    "store_query",
    "store_query_each",
    "store_conn_exec",
}


def load(path):
    """The samples, each a list of function names, innermost first."""
    samples = []
    frames = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if frames:
                    samples.append(frames)
                frames = []
                continue
            if not line[0].isspace():
                frames = []
                continue
            parts = line.split(None, 1)
            frames.append(parts[1].split("+")[0] if len(parts) > 1 else "?")
    if frames:
        samples.append(frames)
    return samples


def statement_owner(frames):
    """The idemhook function whose statement the sample was in, or None."""
    if "store_sqlite_run" not in frames:
        return None
    i = frames.index("store_sqlite_run")
    j = i + 1
    while j < len(frames) and frames[j] in STORE_RUNNERS:
        j += 1
    owner = frames[j] if j < len(frames) else "?"
    if owner == "store_writer_main":
        inner = " ".join(frames[:i])
        if "Commit" in inner or "fdatasync" in inner or "WalFrames" in inner:
            return owner + " commit"
        return owner + " begin/savepoints"
    return owner


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    samples = load(sys.argv[1])
    total = len(samples)
    if total == 0:
        sys.exit("writer_profile.py: no samples")
    owners = collections.Counter()
    for frames in samples:
        owner = statement_owner(frames)
        if owner is None:
            owner = next((n for n in frames if n.startswith(("store_", "MHD_", "buf_"))), "?")
        owners[owner] += 1
    print(f"{total} samples of the writer")
    print("by the function that ran the statement (or the innermost idemhook one):")
    for name, n in owners.most_common(20):
        print(f"  {100.0 * n / total:5.1f}%  {name}")

    def share(pred):
        return 100.0 * sum(1 for frames in samples if pred(frames)) / total

    costs = [
        ("inside sqlite3_step", lambda fr: "sqlite3_step" in fr),
        ("pread (pages not in the cache)", lambda fr: any("pread" in n for n in fr)),
        ("pwrite (WAL frames)", lambda fr: any("pwrite" in n for n in fr)),
        ("fdatasync", lambda fr: any("fdatasync" in n for n in fr)),
        (
            "temporary b-trees (sqlite3BtreeOpen/Close, sqlite3PagerOpen/Close)",
            lambda fr: any(
                n in ("sqlite3BtreeOpen", "sqlite3BtreeClose", "sqlite3PagerOpen", "sqlite3PagerClose")
                for n in fr
            ),
        ),
        ("malloc/free", lambda fr: any("malloc" in n or "free" in n for n in fr)),
        ("building SQL text (buf_*)", lambda fr: any(n.startswith("buf_") for n in fr)),
        ("sqlite3BtreeIndexMoveto", lambda fr: "sqlite3BtreeIndexMoveto" in fr),
        ("sqlite3BtreeInsert", lambda fr: "sqlite3BtreeInsert" in fr),
    ]
    print("samples with on their stack:")
    for label, pred in costs:
        print(f"  {share(pred):5.1f}%  {label}")


if __name__ == "__main__":
    main()
