#!/usr/bin/env python3
"""check-names.py: the dashboard and the alerting rules name only metrics that
idemhook exports, the dashboard imports anywhere (its data source is a
variable that starts from the data source chosen at import) and charts the
families in CHARTED. Starts IDEMHOOK_BIN on loopback with a fresh database, reads the
families from its /metrics, then reads every PromQL expression.
Usage: check-names.py IDEMHOOK_BIN DASHBOARD_JSON RULES_YML"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

# Names that come from elsewhere: Prometheus itself and node_exporter.
FOREIGN = {"up", "node_filesystem_avail_bytes", "node_filesystem_size_bytes"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "inf", "nan"}


def exported(binary):
    with tempfile.TemporaryDirectory() as d:
        ini = os.path.join(d, "idemhook.ini")
        with open(ini, "w") as f:
            f.write(f"""[server]
listen = 127.0.0.1:0
port_file = {d}/port

[store]
path = {d}/idemhook.db

[admin]
listen = 127.0.0.1:0
port_file = {d}/admin_port

[provider stripe]
type = stripe
secret = whsec_check_names

[outbound]
notify_url = http://127.0.0.1:9/notify
""")
        log = open(os.path.join(d, "log"), "w")
        proc = subprocess.Popen([binary, "-c", ini, "serve"], stderr=log)
        try:
            port_file = os.path.join(d, "admin_port")
            for _ in range(400):
                if os.path.exists(port_file) and open(port_file).read().strip():
                    break
                time.sleep(0.05)
            port = open(port_file).read().strip()
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            log.close()
    names = set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)$", line)
        if m:
            names.add(m.group(1))
            if m.group(2) in ("histogram", "summary"):
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
    return names


def metric_names(expr):
    """The metric names an expression reads: identifiers that are not
    functions, keywords, label names, grouping lists, strings or variables."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # strings
    e = re.sub(r"\$\{?\w+\}?", "1", e)                      # $__rate_interval, ${instance}
    e = re.sub(r"\{[^}]*\}", "", e)                         # label matchers
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)                        # ranges
    e = re.sub(r"\b\d[\w.]*", "", e)                        # numbers, durations
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if rest.startswith("(") or m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names


# Families an operator needs on the dashboard: the commit time every
# acknowledgement waits for, configuration reloads, and where a new
# callback waits (the stages of its unit, the resume).
CHARTED = {"idemhook_store_commit_seconds", "idemhook_config_reloads_total",
           "idemhook_store_unit_seconds_total", "idemhook_http_resume_seconds_total"}


def dashboard_exprs(dash, problems):
    inputs = [i for i in dash.get("__inputs", []) if i.get("type") == "datasource"]
    if not inputs:
        problems.append("dashboard: no datasource in __inputs (import asks for none)")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource":
        problems.append("dashboard: no datasource variable")
    # Grafana's import puts the chosen data source wherever ${INPUT} is
    # written: the variable the panels read must start from it, or the
    # choice made at import reaches no panel.
    current = variables.get("datasource", {}).get("current", {})
    for i in inputs:
        ref = "${" + i.get("name", "") + "}"
        if current.get("value") != ref:
            problems.append(f"dashboard: the datasource variable does not start from input {ref}, "
                            "so the data source chosen at import is not used")
    exprs = []
    stack = list(dash.get("panels", []))
    while stack:
        p = stack.pop()
        stack.extend(p.get("panels", []))
        if p.get("type") == "row":
            continue
        for who in [p] + p.get("targets", []):
            ds = who.get("datasource", {})
            if not isinstance(ds, dict) or ds.get("uid") != "${datasource}":
                problems.append(f"panel {p.get('title')!r}: data source is not ${{datasource}}")
        if not p.get("targets"):
            problems.append(f"panel {p.get('title')!r}: no query")
        exprs += [(f"panel {p.get('title')!r}", t["expr"]) for t in p.get("targets", [])]
    for v in variables.values():
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query", "")
        m = re.match(r"label_values\((\w+)", q or "")
        if m:
            exprs.append((f"variable {v['name']!r}", m.group(1)))
    return exprs


def rules_exprs(path):
    # The rules file is YAML; its expressions are the only "expr:" keys,
    # either on the line or as a "|" block below it.
    exprs, lines = [], open(path).read().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"(\s*)expr:\s*(.*)$", lines[i])
        i += 1
        if not m:
            continue
        if m.group(2).strip() not in ("|", ">"):
            exprs.append(m.group(2).strip())
            continue
        block = []
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > len(m.group(1))):
            block.append(lines[i].strip())
            i += 1
        exprs.append(" ".join(block))
    return exprs


def main():
    binary, dash_path, rules_path = sys.argv[1:4]
    names = exported(binary)
    if len(names) < 20:
        sys.exit(f"only {len(names)} families read from /metrics: {sorted(names)}")
    problems = []
    dash = json.load(open(dash_path))
    charted = set()
    for where, expr in dashboard_exprs(dash, problems):
        read = metric_names(expr)
        charted |= read
        for n in sorted(read - names):
            problems.append(f"dashboard {where}: {n} is not exported")
    for family in sorted(CHARTED):
        if not any(n == family or n.startswith(family + "_") for n in charted):
            problems.append(f"dashboard: no panel charts {family}")
    rules = rules_exprs(rules_path)
    if not rules:
        problems.append("rules: no expressions found")
    for expr in rules:
        for n in sorted(metric_names(expr) - names - FOREIGN):
            problems.append(f"rules: {n} is not exported (in {expr!r})")
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"{len(names)} names exported; dashboard and {len(rules)} rules read only those")


if __name__ == "__main__":
    main()
