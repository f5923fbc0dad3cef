#!/usr/bin/env python3
"""include-graph.py: the module include graph of receiver/, providers/ and handlers/, checked.

A module is a .c file and its .h (stripe.c, stripe.h), with the files
PART_OF names as its parts; a module depends on
another when its .c or .h has `#include "other.h"`. The check fails when

  - modules include each other, directly or through others (a cycle), or
  - a module in one folder includes a module in a folder that FOLDER_DEPS
    does not allow it to (the layout: dependencies point down).

Usage: include-graph.py [--root DIR] [--dot] [--deps] [--quiet] [--self-test]
  --root DIR    the source tree (default: this script's ../..)
  --dot         print the module graph in Graphviz dot and exit 0
  --deps        print each module's dependencies and exit 0
  --self-test   check the checker on small made-up trees (a cycle, a
                forbidden include, a clean tree) and exit
Exit status: 0 clean, 1 a cycle or a forbidden include, 2 usage or I/O error.
Python 3 standard library only.
"""
import os
import re
import sys

# Folders scanned, relative to the root. A subfolder (receiver/cli) is a
# folder of its own.
SCAN = ['receiver', 'providers', 'handlers']


# Folder -> the folders its modules may include (besides its own), lowest
# first: dependencies point down (docs/architecture.md). meson gives each
# folder's static library the include directories of these folders only, so
# a forbidden include already fails the build; this names it plainly. A
# folder not listed here may include anything.
FOLDER_DEPS = {
    'receiver/common': [],
    'receiver/transport': ['receiver/common'],
    'receiver/engine/store': ['receiver/common', 'receiver/transport'],
    'providers': ['receiver/common', 'receiver/transport'],
    'handlers': ['receiver/common', 'receiver/transport', 'receiver/engine/store', 'providers'],
    'receiver/engine': ['receiver/common', 'receiver/transport', 'receiver/engine/store', 'providers',
                        'handlers'],
    'receiver/console': ['receiver/common', 'receiver/transport', 'receiver/engine/store',
                         'providers', 'handlers', 'receiver/engine'],
    'receiver/cli': ['receiver/common', 'receiver/transport', 'receiver/engine/store', 'providers',
                     'handlers', 'receiver/engine', 'receiver/console'],
}

# Files that are parts of another module: the store's engines and the
# interface between them and the store's backend-neutral core.
PART_OF = {'store_engine': 'store', 'store_pg': 'store', 'store_sqlite': 'store'}

# Headers that are not modules of the scanned tree (generated at build time
# or living elsewhere): ignored.
EXTERNAL = {'build_config.h', 'migrations.h', 'checkout_assets.h', 'senders_data.h',
            'console_assets.h'}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def scan(root):
    """Return {module: folder} and {module: set(included modules)}."""
    folder_of = {}
    files_of = {}
    for top in SCAN:
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root).replace(os.sep, '/')
            for name in sorted(filenames):
                if not name.endswith(('.c', '.h')):
                    continue
                mod = PART_OF.get(name[:-2], name[:-2])
                if mod in folder_of and folder_of[mod] != rel:
                    raise SystemExit('include-graph.py: module %r is in both %s and %s'
                                     % (mod, folder_of[mod], rel))
                folder_of[mod] = rel
                files_of.setdefault(mod, []).append(os.path.join(dirpath, name))
    deps = {}
    for mod, paths in files_of.items():
        out = set()
        for path in paths:
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
            for inc in INCLUDE_RE.findall(text):
                name = os.path.basename(inc)
                if name in EXTERNAL or not name.endswith('.h'):
                    continue
                dep = PART_OF.get(name[:-2], name[:-2])
                if dep == mod:
                    continue
                if dep not in folder_of:
                    raise SystemExit('include-graph.py: %s includes "%s", which is in none of %s'
                                     % (path, inc, ', '.join(SCAN)))
                out.add(dep)
        deps[mod] = out
    return folder_of, deps


def cycles(deps):
    """The strongly connected components with more than one module (Tarjan)."""
    index = {}
    low = {}
    on_stack = set()
    stack = []
    found = []
    counter = [0]

    def visit(v):
        # Iterative, so a long chain cannot hit Python's recursion limit.
        work = [(v, iter(sorted(deps[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(deps[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return sorted(found)


def cycle_path(comp, deps):
    """One concrete loop through a component, for the message: a -> b -> a."""
    members = set(comp)
    start = comp[0]
    # Breadth-first from start back to start inside the component.
    prev = {}
    queue = [start]
    seen = set()
    while queue:
        v = queue.pop(0)
        for w in sorted(deps[v] & members):
            if w == start:
                path = [start]
                while v != start:
                    path.append(v)
                    v = prev[v]
                path.append(start)
                path = [path[0]] + list(reversed(path[1:-1])) + [start]
                return path
            if w not in seen:
                seen.add(w)
                prev[w] = v
                queue.append(w)
    return comp + [start]


def forbidden(folder_of, deps, folder_deps):
    bad = []
    for mod in sorted(deps):
        src = folder_of[mod]
        allowed = folder_deps.get(src)
        if allowed is None:
            continue
        for dep in sorted(deps[mod]):
            dst = folder_of[dep]
            if dst != src and dst not in allowed:
                bad.append((mod, src, dep, dst))
    return bad


def check(root, folder_deps, quiet):
    """Prints every cycle and forbidden include; returns 0 clean, 1 not."""
    folder_of, deps = scan(root)
    status = 0
    for comp in cycles(deps):
        status = 1
        print('cycle: %s (modules %s)' % (' -> '.join(cycle_path(comp, deps)), ', '.join(comp)))
    for mod, src, dep, dst in forbidden(folder_of, deps, folder_deps):
        status = 1
        print('forbidden: %s/%s includes %s/%s.h (%s may include: %s)'
              % (src, mod, dst, dep, src, ', '.join(folder_deps[src]) or 'nothing else'))
    if status == 0 and not quiet:
        print('include-graph.py: %d modules, %d includes, no cycle, no forbidden include'
              % (len(deps), sum(len(d) for d in deps.values())))
    return status


def self_test():
    """The checker finds a three-module cycle and a forbidden include, and
    passes a clean tree. Returns 0 or 1."""
    import contextlib
    import io
    import shutil
    import tempfile

    clean = {'receiver/a.c': '#include "a.h"\n#include "b.h"\n', 'receiver/a.h': '',
             'receiver/b.h': '#include <stdio.h>\n', 'handlers/h.c': '#include "a.h"\n'}
    cyclic = dict(clean)
    cyclic['receiver/b.h'] = '#include "c.h"\n'
    cyclic['providers/c.h'] = '  #  include "a.h"\n'
    # The real table on a small tree of the real folders: the configuration
    # in common may not include the listener above it.
    layered = {'receiver/common/config.c': '#include "config.h"\n', 'receiver/common/config.h': '',
               'receiver/transport/http.h': '#include "config.h"\n',
               'receiver/engine/app.c': '#include "http.h"\n#include "config.h"\n'}
    upward = dict(layered)
    upward['receiver/common/config.c'] = '#include "config.h"\n#include "http.h"\n'
    cases = [
        ('a clean tree passes', clean, {}, 0, ''),
        ('a cycle a -> b -> c -> a fails', cyclic, {}, 1, 'cycle: a -> b -> c -> a'),
        ('an include the table forbids fails', clean, {'handlers': []}, 1,
         'forbidden: handlers/h includes receiver/a.h'),
        ('an include the table allows passes', clean, {'handlers': ['receiver']}, 0, ''),
        ('the real folders pass with FOLDER_DEPS', layered, FOLDER_DEPS, 0, ''),
        ('an upward include fails with FOLDER_DEPS', upward, FOLDER_DEPS, 1,
         'forbidden: receiver/common/config includes receiver/transport/http.h'),
    ]
    failed = 0
    for name, files, folder_deps, want_status, want_text in cases:
        root = tempfile.mkdtemp(prefix='include-graph-')
        try:
            for path, text in files.items():
                full = os.path.join(root, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, 'w') as f:
                    f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                got = check(root, folder_deps, True)
        finally:
            shutil.rmtree(root)
        ok = got == want_status and want_text in out.getvalue()
        failed += not ok
        print('%s: %s' % ('ok' if ok else 'FAILED', name))
        if not ok:
            print('  status %d, output: %r' % (got, out.getvalue()))
    return 1 if failed else 0


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    mode = 'check'
    quiet = False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == '--root' and args:
            root = args.pop(0)
        elif a == '--dot':
            mode = 'dot'
        elif a == '--deps':
            mode = 'deps'
        elif a == '--quiet':
            quiet = True
        elif a == '--self-test':
            return self_test()
        else:
            sys.stderr.write(__doc__)
            return 2
    for folder in FOLDER_DEPS:
        if not os.path.isdir(os.path.join(root, folder)):
            sys.stderr.write('include-graph.py: FOLDER_DEPS names %s, which does not exist\n' % folder)
            return 2
    try:
        if mode == 'check':
            return check(root, FOLDER_DEPS, quiet)
        folder_of, deps = scan(root)
    except OSError as e:
        sys.stderr.write('include-graph.py: %s\n' % e)
        return 2
    if mode == 'dot':
        print('digraph includes {')
        for mod in sorted(deps):
            for dep in sorted(deps[mod]):
                print('\t"%s" -> "%s";' % (mod, dep))
        print('}')
    else:
        for mod in sorted(deps):
            print('%s/%s: %s' % (folder_of[mod], mod, ' '.join(sorted(deps[mod]))))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
