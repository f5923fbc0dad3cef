#!/usr/bin/env python3
"""config_keys.py: docs/configuration.md documents every key the parser
accepts, and says of each whether a reload applies it, as the code does.

The keys come from the parser's own tables: config_known_keys in
receiver/common/config.c (section, key, CONFIG_KEY_* flags) and each provider
profile's p_keys in providers/*.c. Fails, naming them, on a key missing from
the reference tables, from the profile table, or from the reload table, or
in the wrong column of the reload table.
"""

import os
import re
import sys

ROOT = os.environ.get("IDEMHOOK_SOURCE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def parser_keys():
    """(section, key, reloads) of config_known_keys; '*_x' becomes NAME_x."""
    src = read("receiver/common/config.c")
    m = re.search(r"config_known_keys\[\] = \{(.*?)\n\};", src, re.S)
    if m is None:
        sys.exit("FAIL - config_known_keys not found in receiver/common/config.c")
    keys = []
    for sec, key, flags in re.findall(r'\{"([^"]+)", "([^"]+)"(?:, ([^}]*))?\}', m.group(1)):
        keys.append((sec, key.replace("*_", "NAME_"), "CONFIG_KEY_RELOADS" in (flags or "")))
    if len(keys) < 50:
        sys.exit(f"FAIL - only {len(keys)} keys read from config_known_keys")
    return keys


def profile_keys():
    """{profile name: [keys]} from each provider file's p_keys array."""
    mapping = re.search(r"#define PROVIDER_MAPPING_KEYS(.*?)\n\n", read("providers/providers.h"), re.S)
    mapping_keys = re.findall(r'"([^"]+)"', mapping.group(1)) if mapping else []
    out = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "providers"))):
        if not name.endswith(".c"):
            continue
        src = read("providers/" + name)
        arr = re.search(r"static const char \*const \w+_keys\[\] = \{(.*?)\};", src, re.S)
        pname = re.search(r'\.p_name = "([^"]+)"', src)
        if arr is None or pname is None:
            continue
        keys = re.findall(r'"([^"]+)"', arr.group(1))
        if "PROVIDER_MAPPING_KEYS" in arr.group(1):
            keys += mapping_keys
        out[pname.group(1)] = keys
    if len(out) < 6:
        sys.exit(f"FAIL - only {len(out)} provider profiles found")
    return out, mapping_keys


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def ticked(cell):
    return re.findall(r"`([^`]+)`", cell)


def section_of(cell):
    m = re.match(r"`\[(provider) NAME\]`|`\[([a-z_]+)\]`", cell)
    if m is None:
        return None
    return m.group(1) or m.group(2)


def main():
    doc = read("docs/configuration.md")
    lines = doc.splitlines()
    problems = []

    # The reference tables: | section | key | default | meaning |.
    documented = {}
    current = None
    for line in lines:
        if not line.startswith("| ") or line.startswith("| section | a reload"):
            current = None if not line.startswith("|") else current
            continue
        c = cells(line)
        if len(c) != 4:
            continue
        sec = section_of(c[0])
        if sec is not None:
            current = sec
        elif c[0] != "":
            current = None
            continue
        if current is not None:
            documented.setdefault(current, set()).update(ticked(c[1]))

    reload_rows = {}
    m = re.search(r"^## What a reload applies\n(.*?)(?=^## |\Z)", doc, re.S | re.M)
    if m is None:
        problems.append("no '## What a reload applies' section")
    else:
        for line in m.group(1).splitlines():
            c = cells(line) if line.startswith("| `[") else None
            if c and len(c) == 3:
                reload_rows[section_of(c[0])] = (set(ticked(c[1])), set(ticked(c[2])))

    for sec, key, reloads in parser_keys():
        if key not in documented.get(sec, set()):
            problems.append(f"[{sec}] {key}: not in the reference tables")
        applies, restart = reload_rows.get(sec, (set(), set()))
        if reloads and key not in applies:
            problems.append(f"[{sec}] {key}: a reload applies it, the reload table does not say so")
        if not reloads and key not in restart:
            problems.append(f"[{sec}] {key}: needs a restart, the reload table does not say so")

    profiles, mapping_keys = profile_keys()
    rows = {}
    for line in lines:
        c = cells(line) if line.startswith("| ") else None
        if c and len(c) == 2:
            rows[c[0].strip("`")] = set(ticked(c[1]))
    for pname, keys in profiles.items():
        for key in keys:
            if key in rows.get(pname, set()):
                continue
            if key in mapping_keys and key in rows.get("mapping keys", set()) and "mapping keys" in " ".join(
                    l for l in lines if l.startswith("| `" + pname + "`")):
                continue
            problems.append(f"[provider NAME] type = {pname}: key {key} not in the profile table")

    for p in problems:
        print(f"FAIL - docs/configuration.md: {p}")
    if problems:
        sys.exit(1)
    print(f"ok - {sum(len(v) for v in documented.values())} keys documented, "
          f"{len(reload_rows)} sections in the reload table, {len(profiles)} profiles")


if __name__ == "__main__":
    main()
