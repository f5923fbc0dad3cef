#!/usr/bin/env python3
"""check_seams.py: each foreign library's header is included by its one module.

meson already gives a library's headers to its module's static library only;
this names the offender when someone includes one elsewhere anyway (a
header found through a system include path would slip past meson)."""
import os
import re
import sys

SEAMS = {
    'sqlite3.h': {'receiver/engine/store/store_sqlite.c'},
    'libpq-fe.h': {'receiver/engine/store/store_pg.c'},
    'microhttpd.h': {'receiver/transport/http.c'},
    'curl/curl.h': {'receiver/transport/httpc.c'},
}
# Libraries with many headers: any header under the prefix.
SEAM_PREFIXES = {
    'openssl/': {'receiver/common/crypto.c'},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)

root = sys.argv[1] if len(sys.argv) > 1 else '.'
bad = []
for top in ('receiver', 'handlers', 'providers'):  # the daemon; benchmarks and reproducers may compare
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        for name in names:
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding='utf-8', errors='replace') as f:
                for header in INCLUDE.findall(f.read()):
                    owners = SEAMS.get(header)
                    for prefix, who in SEAM_PREFIXES.items():
                        if header.startswith(prefix):
                            owners = who
                    if owners is not None and rel not in owners:
                        bad.append(f'{rel} includes {header}, which only {", ".join(sorted(owners))} may')
for line in bad:
    print(line)
sys.exit(1 if bad else 0)
