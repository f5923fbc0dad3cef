#!/usr/bin/python3
"""console.py: the operator console in headless Chromium, driven by Selenium.

Debian's chromium, chromium-driver and python3-selenium only (the browser
and driver classes are checkout.py's). Starts the real daemon with a
[console] section, feeds it signed Stripe callbacks (a payment whose
outbound call dies, failed events, a hostile payload, a 1 MB one), then
logs in and works through every page and action, with JavaScript on and
off, checking each action in the database (through the CLI) and the audit
log, every page at 1,100 px ("narrow") and on a 390 px phone ("phone"),
and "reconcile now" on a provider slower than the console's 1.5 s (a
small fake Stripe API here: "reconcile"). IDEMHOOK_CONSOLE_SCENARIOS=phone,narrow runs only those.
Screenshots go to tests/browser/artifacts/console-*.png; docs/console.md
shows them.
"""

import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checkout import ARTIFACTS, Browser, Driver, free_port  # noqa: E402

SECRET = "whsec_browser_console_secret"
OPERATOR = "browser-operator-token-0123456789"
READONLY = "browser-readonly-token-0123456789"
WAIT_S = 30
PROVIDER_DELAY_S = 3

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok - {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL - {name}{': ' + str(detail) if detail else ''}", flush=True)


def shot(driver, name):
    driver.save_screenshot(os.path.join(ARTIFACTS, f"console-{name}.png"))


class SlowStripe:
    """A Stripe API that takes PROVIDER_DELAY_S to list its events (more
    than the console's 1.5 s): one payment for the order given, so that
    "reconcile now" goes on after its request and applies it later."""

    def __init__(self):
        self.order = None
        self.asked = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                owner.asked += 1
                time.sleep(PROVIDER_DELAY_S)
                obj = {"id": "pi_browser_rec", "object": "payment_intent", "amount": 2500,
                       "amount_received": 2500, "currency": "usd", "status": "succeeded",
                       "metadata": {"order_id": owner.order}}
                event = {"id": "evt_browser_rec", "object": "event",
                         "api_version": "2024-06-20", "created": int(time.time()),
                         "type": "payment_intent.succeeded", "livemode": True,
                         "data": {"object": obj}}
                body = json.dumps({"object": "list", "url": "/v1/events", "data": [event],
                                   "has_more": False}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Daemon:
    def __init__(self, bin_path, tmp, provider_base):
        self.bin = bin_path
        self.tmp = tmp
        self.port = free_port()
        self.admin = free_port()
        self.conf = os.path.join(tmp, "idemhook.ini")
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "[server]", f"listen = 127.0.0.1:{self.port}", "", "[store]",
                f"path = {os.path.join(tmp, 'idemhook.db')}", "", "[admin]",
                f"listen = 127.0.0.1:{self.admin}", "", "[provider stripe]", "type = stripe",
                f"secret = {SECRET}", "", "[outbound]", "notify_url = http://127.0.0.1:9/notify",
                "max_attempts = 1", "poll = 50ms", "connect_timeout = 1s", "", "[console]",
                "enabled = yes", "token = alice operator env:CONSOLE_OPERATOR",
                "token = bob read-only env:CONSOLE_READONLY", "", "[provider rec]",
                "type = stripe", f"secret = {SECRET}", "api_key = env:REC_API_KEY",
                f"api_base_url = {provider_base}", "",
            ]))
        env = dict(os.environ, CONSOLE_OPERATOR=OPERATOR, CONSOLE_READONLY=READONLY,
                   REC_API_KEY="rk_browser_console_rec")
        log = open(os.path.join(tmp, "daemon.log"), "ab")
        self.proc = subprocess.Popen([bin_path, "serve", "-c", self.conf], stdout=log,
                                     stderr=log, env=env)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/healthz",
                                            timeout=2):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError("the daemon did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cli(self, *args):
        r = subprocess.run([self.bin, "-c", self.conf] + list(args), capture_output=True,
                           text=True, timeout=60)
        return r.returncode, r.stdout

    def stripe(self, event_id, obj):
        body = json.dumps({"id": event_id, "object": "event", "api_version": "2024-06-20",
                           "created": int(time.time()), "type": "payment_intent.succeeded",
                           "livemode": True, "data": {"object": obj}}).encode()
        t = int(time.time())
        sig = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/hooks/stripe", data=body,
                                     method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Stripe-Signature": f"t={t},v1={sig}"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def pay(self, event_id, order, amount, extra=None):
        obj = {"id": f"pi_{event_id}", "object": "payment_intent", "amount": amount,
               "amount_received": amount, "currency": "usd", "status": "succeeded",
               "metadata": {"order_id": order}}
        obj.update(extra or {})
        return self.stripe(event_id, obj)

    def event_id(self, key):
        rc, out = self.cli("events", "list", "--limit", "100")
        for line in out.splitlines():
            parts = line.split()
            if len(parts) > 4 and parts[4] == key:
                return int(parts[0])
        raise RuntimeError(f"no event {key}: {out}")


def wait_text(driver, text):
    # The page may be replaced between finding its body and reading it (a
    # form's POST, then its redirect): look again rather than fail.
    WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: text in d.find_element(By.TAG_NAME, "body").text)


def go(driver, url):
    driver.get(url)
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def login(driver, base, token):
    go(driver, f"{base}/console/")
    check("a page without a session shows the login form", "/console/login" in driver.current_url)
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: d.current_url.endswith("/console/"))


def scenario_operator(driver, d, base, ids):
    go(driver, f"{base}/console/login")
    shot(driver, "login")
    login(driver, base, OPERATOR)
    wait_text(driver, "open failed events")
    shot(driver, "overview")
    check("the overview charts each provider", len(driver.find_elements(By.CSS_SELECTOR,
                                                                         "svg.chart")) >= 1)
    # events, filtered to the failed ones with the form
    driver.find_element(By.LINK_TEXT, "events").click()
    Select(driver.find_element(By.ID, "f-outcome")).select_by_visible_text("failed")
    driver.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: "outcome=failed" in d.current_url)
    rows = driver.find_elements(By.CSS_SELECTOR, "#events tr")
    text = driver.find_element(By.ID, "events").text
    check("the failed filter lists the failed events", "evt_unknown_1" in text and
          "evt_paid" not in text, text[:300])
    shot(driver, "events")
    check("the events list has rows", len(rows) > 2)
    # the hostile event: its payload is text, nothing of it runs
    go(driver, f"{base}/console/events/{ids['hostile']}")
    body = driver.find_element(By.TAG_NAME, "body").text
    check("a <script> in the payload is shown as text", "<script>window.pwned=1</script>" in body)
    check("the payload's markup did not become elements",
          not driver.find_elements(By.CSS_SELECTOR, "main img, main script"))
    check("the payload's script did not run", driver.execute_script("return window.pwned") is None)
    shot(driver, "event-hostile")
    go(driver, f"{base}/console/events/{ids['big']}")
    raw = driver.find_element(By.ID, "payload-raw").text
    check("a 1 MB payload is shown, cut with a note", "(cut:" in raw, raw[-200:])
    # dismiss with a reason
    go(driver, f"{base}/console/events/{ids['unknown_1']}")
    driver.find_element(By.ID, "dismiss-reason").send_keys("payment made at the till")
    driver.find_element(By.ID, "dismiss").click()
    wait_text(driver, "dismissed")
    check("an action ends on its page's own URL (Post/Redirect/Get)",
          driver.current_url == f"{base}/console/events/{ids['unknown_1']}", driver.current_url)
    shot(driver, "event-dismissed")
    rc, out = d.cli("events", "show", str(ids["unknown_1"]))
    rc, audit = d.cli("audit", "list")
    check("the dismissal is in the audit log as alice's",
          "console:alice" in audit and "payment made at the till" in audit, audit)
    # reprocess: the page asks first (JavaScript on)
    go(driver, f"{base}/console/events/{ids['unknown_2']}")
    driver.find_element(By.ID, "reprocess").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: d.switch_to.alert)
    driver.switch_to.alert.accept()
    wait_text(driver, "still failed (unknown_order)")
    rc, audit = d.cli("audit", "list", "--action", "events.reprocess")
    check("the reprocess is in the audit log", "event:%d" % ids["unknown_2"] in audit, audit)
    # the outbox: the dead row, its attempts, then a bulk retry with its count
    go(driver, f"{base}/console/outbox?status=dead")
    shot(driver, "outbox-dead")
    driver.find_element(By.ID, "retry-all").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: d.switch_to.alert)
    driver.switch_to.alert.accept()
    wait_text(driver, "1 of 1 rows queued again")
    check("the bulk retry ends on the status's page",
          driver.current_url == f"{base}/console/outbox?status=dead", driver.current_url)
    # reloading that page does not send the retry again
    driver.refresh()
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    rc, audit = d.cli("audit", "list", "--action", "outbox.retry")
    check("the bulk retry is in the audit log", "bulk retry" in audit, audit)
    rc, whole = d.cli("audit", "list", "--action", "outbox.retry_all")
    check("a reload did not retry again", whole.count("outbox.retry_all") == 1, whole)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rc, out = d.cli("outbox", "list", "--status", "dead")
        if "notify" in out:
            break
        time.sleep(0.2)
    go(driver, f"{base}/console/outbox")
    driver.find_element(By.CSS_SELECTOR, "#outbox td.num a").click()
    wait_text(driver, "Attempts (newest first)")
    attempts = driver.find_elements(By.CSS_SELECTOR, "table.attempts tr")
    check("the row shows every attempt", len(attempts) >= 3, len(attempts))
    shot(driver, "outbox-row")
    # the order's story
    go(driver, f"{base}/console/orders/{ids['order']}")
    timeline = driver.find_element(By.ID, "timeline").text
    check("the order's timeline has its event, points and outbox row",
          "event" in timeline and "points" in timeline and "outbox" in timeline, timeline)
    shot(driver, "order")
    go(driver, f"{base}/console/rejected")
    check("the rejected page lists the forged callback",
          "bad_signature" in driver.find_element(By.ID, "rejected").text)
    shot(driver, "rejected")
    go(driver, f"{base}/console/audit")
    shot(driver, "audit")
    driver.find_element(By.CSS_SELECTOR, "header form button").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: "/console/login" in d.current_url)
    go(driver, f"{base}/console/events")
    check("after logging out the pages ask for a login again", "/console/login" in driver.current_url)


# What a page lays out wider than its window, as "selector: right edge":
# the document itself, and each table past the box it sits in (a table
# wider than its box spills over the page's edge).
OVERFLOW_JS = """
const out = [];
const doc = document.documentElement;
if (doc.scrollWidth > window.innerWidth) {
  out.push(`document: ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
}
for (const t of document.querySelectorAll('table')) {
  const box = t.parentElement.getBoundingClientRect();
  const r = t.getBoundingClientRect();
  if (r.right > box.right + 0.5) {
    out.push(`table${t.id ? '#' + t.id : ''}: ends at ${Math.round(r.right)} px, ` +
             `its box at ${Math.round(box.right)} px`);
  }
}
return out;
"""

NARROW_PAGES = ["/console/", "/console/events", "/console/outbox", "/console/outbox?status=dead",
                "/console/audit", "/console/rejected"]


def scenario_narrow(driver, d, base, ids):
    # A 1,100 px window (a laptop with a side panel open): every page fits,
    # the overview's table of callbacks by provider (nine columns) too.
    driver.set_window_size(1100, 900)
    login(driver, base, OPERATOR)
    pages = NARROW_PAGES + [f"/console/events/{ids['unknown_2']}",
                            f"/console/orders/{ids['order']}"]
    for page in pages:
        go(driver, f"{base}{page}")
        over = driver.execute_script(OVERFLOW_JS)
        check(f"{page} fits a 1,100 px window", not over, "; ".join(over))
    go(driver, f"{base}/console/")
    shot(driver, "overview-1100")


# What keeps a page from being used on a phone, as text: no viewport meta
# (a phone would lay it out 980 px wide and shrink it), a layout wider than
# the window (the whole page scrolls sideways), a table past its box that
# no box of its own scrolls, and a control (button, field, link of the
# header) out of reach: past the window's edge, or past the edge of the
# box that scrolls it.
PHONE_JS = """
const out = [];
const w = window.innerWidth;
const meta = document.querySelector('meta[name=viewport]');
if (!meta || !/width=device-width/.test(meta.content)) {
  out.push('no <meta name=viewport content=width=device-width>');
}
if (w > 400) {
  out.push(`laid out ${w} px wide, not at the phone's width`);
}
const doc = document.documentElement;
if (doc.scrollWidth > w) {
  out.push(`document: ${doc.scrollWidth} px wide in a ${w} px window`);
}
function scroller(el) {
  for (let p = el; p && p !== document.body; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if (o === 'auto' || o === 'scroll') {
      return p;
    }
  }
  return null;
}
function name(el) {
  return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
         (el.textContent ? ` "${el.textContent.trim().slice(0, 20)}"` : '');
}
for (const t of document.querySelectorAll('table')) {
  const box = t.parentElement.getBoundingClientRect();
  const r = t.getBoundingClientRect();
  if (r.right > box.right + 0.5 && !scroller(t)) {
    out.push(`${name(t).split(' ')[0]}: ends at ${Math.round(r.right)} px, ` +
             `its box at ${Math.round(box.right)} px, and nothing scrolls it`);
  }
}
const controls = 'button, input:not([type=hidden]), select, textarea, header a';
for (const el of document.querySelectorAll(controls)) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) {
    continue;
  }
  const s = scroller(el);
  const lim = s ? s.getBoundingClientRect() : {left: 0, right: w};
  if (r.left < lim.left - 0.5 || r.right > Math.min(lim.right, w) + 0.5) {
    out.push(`${name(el)}: from ${Math.round(r.left)} to ${Math.round(r.right)} px, ` +
             `out of reach`);
  }
}
return out;
"""

PHONE_W = 390
PHONE_H = 844


def phone(driver):
    """A phone's screen, as Chromium's device emulation lays it out: 390
    CSS px wide, touch, and the page's viewport meta honoured (a page
    without one is laid out 980 px wide, as on a phone)."""
    driver.command_executor._commands["executeCdpCommand"] = (
        "POST", "/session/$sessionId/goog/cdp/execute")
    driver.execute("executeCdpCommand", {"cmd": "Emulation.setDeviceMetricsOverride", "params": {
        "width": PHONE_W, "height": PHONE_H, "deviceScaleFactor": 1, "mobile": True}})
    driver.execute("executeCdpCommand", {"cmd": "Emulation.setTouchEmulationEnabled",
                                         "params": {"enabled": True}})


def scenario_phone(driver, d, base, ids):
    # An operator on call, on a phone 390 px wide: every page usable
    # without scrolling the whole page sideways (a wide table scrolls in
    # its own box), every button and field within reach.
    phone(driver)
    go(driver, f"{base}/console/login")
    over = driver.execute_script(PHONE_JS)
    check("/console/login is usable on a 390 px phone", not over, "; ".join(over))
    shot(driver, "phone-login")
    login(driver, base, OPERATOR)
    rc, out = d.cli("outbox", "list", "--status", "dead")
    outbox_id = None
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            outbox_id = parts[0]
            break
    pages = NARROW_PAGES + ["/console/events?outcome=failed",
                            f"/console/events/{ids['unknown_2']}",
                            f"/console/events/{ids['big']}",
                            f"/console/orders/{ids['order']}"]
    if outbox_id is not None:
        pages.append(f"/console/outbox/{outbox_id}")
    for page in pages:
        go(driver, f"{base}{page}")
        over = driver.execute_script(PHONE_JS)
        check(f"{page} is usable on a 390 px phone", not over, "; ".join(over))
    for page, name in [("/console/", "overview"), ("/console/events", "events"),
                       (f"/console/orders/{ids['order']}", "order"),
                       (f"/console/events/{ids['unknown_2']}", "event")]:
        go(driver, f"{base}{page}")
        shot(driver, f"phone-{name}")
    # an action from the phone: the event's reprocess button is reached
    # and works
    go(driver, f"{base}/console/events/{ids['unknown_2']}")
    driver.find_element(By.ID, "reprocess").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: d.switch_to.alert)
    driver.switch_to.alert.accept()
    wait_text(driver, "still failed (unknown_order)")
    check("an action from the phone ends on its page",
          driver.current_url == f"{base}/console/events/{ids['unknown_2']}", driver.current_url)


def scenario_reconcile(driver, d, base, ids, api):
    # "Reconcile now" on a provider slower than the console's 1.5 s: the
    # browser is answered in time, on the order page, which says the run
    # goes on and reloads itself until the outcome is there.
    login(driver, base, OPERATOR)
    page = f"{base}/console/orders/{ids['rec_order']}"
    go(driver, page)
    t0 = time.monotonic()
    driver.find_element(By.ID, "reconcile").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: d.switch_to.alert)
    driver.switch_to.alert.accept()
    wait_text(driver, "the reconcile run goes on")
    took = time.monotonic() - t0
    check("reconcile now answers before the slow provider does", took < PROVIDER_DELAY_S,
          f"{took:.1f} s")
    check("it answers on the order page (Post/Redirect/Get)", driver.current_url == page,
          driver.current_url)
    check("the order page says the run is under way",
          bool(driver.find_elements(By.ID, "reconcile-running")))
    shot(driver, "order-reconcile-running")
    # no reload by the test: the page reloads itself
    wait_text(driver, "Reconciled: 1 event(s) found, 1 applied")
    check("the outcome shows on the order page by itself",
          "Reconciled: 1 event(s) found, 1 applied" in
          driver.find_element(By.ID, "history").text)
    check("the note is gone once the run ended",
          not driver.find_elements(By.ID, "reconcile-running"))
    rc, audit = d.cli("audit", "list", "--action", "order.reconcile")
    check("the run is audited once, as ok",
          audit.count("order.reconcile") == 1 and "ok: Reconciled" in audit, audit)
    check("the provider was asked once", api.asked == 1, api.asked)
    shot(driver, "order-reconciled")


def scenario_no_script(driver, d, base, ids):
    login(driver, base, OPERATOR)
    go(driver, f"{base}/console/events/{ids['unknown_3']}")
    driver.find_element(By.ID, "dismiss-reason").send_keys("test order, JavaScript off")
    driver.find_element(By.ID, "dismiss").click()
    wait_text(driver, "dismissed")
    rc, audit = d.cli("audit", "list", "--action", "events.dismiss")
    check("with JavaScript off a dismissal works the same", "JavaScript off" in audit, audit)


def scenario_read_only(driver, d, base, ids):
    login(driver, base, READONLY)
    go(driver, f"{base}/console/events/{ids['unknown_2']}")
    check("a read-only session sees no action", not driver.find_elements(By.ID, "reprocess"))
    shot(driver, "read-only")


def seed(d):
    ids = {}
    rc, out = d.cli("order", "create", "--amount", "1999", "--currency", "usd")
    order = out.strip().split()[-1]
    ids["order"] = order
    rc, out = d.cli("order", "create", "--amount", "2500", "--currency", "usd")
    ids["rec_order"] = out.strip().split()[-1]
    check("a payment is acknowledged", d.pay("evt_paid", order, 1999) == 200)
    for i in (1, 2, 3):
        d.pay(f"evt_unknown_{i}", f"ord_browser_nosuch{i:08d}", 500)
        ids[f"unknown_{i}"] = d.event_id(f"evt_unknown_{i}")
    d.pay("evt_hostile", "ord_browser_hostile0001", 700,
          {"description": "<script>window.pwned=1</script>\"><img src=x onerror=\"window.pwned=2\">"})
    ids["hostile"] = d.event_id("evt_hostile")
    d.pay("evt_big", "ord_browser_big000000001", 800, {"description": "x" * 1000000})
    ids["big"] = d.event_id("evt_big")
    # a forged callback, refused before any claim
    global SECRET
    real = SECRET
    SECRET = "whsec_rotated_wrongly"
    d.pay("evt_forged", order, 1999)
    SECRET = real
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rc, out = d.cli("outbox", "list", "--status", "dead")
        if "notify" in out:
            break
        time.sleep(0.2)
    return ids


def main():
    bin_path = os.environ.get("IDEMHOOK_BIN")
    if not bin_path:
        print("console.py: IDEMHOOK_BIN is not set")
        return 1
    os.makedirs(ARTIFACTS, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="idemhook-console-browser-")
    api = SlowStripe()
    d = Daemon(bin_path, tmp, api.base)
    base = f"http://127.0.0.1:{d.admin}"
    chromedriver = None
    only = [n for n in os.environ.get("IDEMHOOK_CONSOLE_SCENARIOS", "").split(",") if n]
    try:
        ids = seed(d)
        api.order = ids["rec_order"]
        chromedriver = Driver(tmp)
        for name, javascript, fn in [("operator", True, scenario_operator),
                                     ("noscript", False, scenario_no_script),
                                     ("readonly", True, scenario_read_only),
                                     ("narrow", True, scenario_narrow),
                                     ("phone", True, scenario_phone),
                                     ("reconcile", True,
                                      lambda drv, d, base, ids: scenario_reconcile(
                                          drv, d, base, ids, api))]:
            if only and name not in only:
                continue
            browser = None
            try:
                browser = Browser(tmp, f"console-{name}", javascript, chromedriver)
                fn(browser.driver, d, base, ids)
            except (WebDriverException, OSError, RuntimeError, KeyError, ValueError) as e:
                check(f"scenario {name} ran to the end", False, str(e).split("\n")[0])
                if browser is not None:
                    try:
                        shot(browser.driver, f"failed-{name}")
                    except WebDriverException:
                        pass
            finally:
                if browser is not None:
                    browser.quit()
    except RuntimeError as e:
        check("the browser came up", False, str(e))
    finally:
        if chromedriver is not None:
            chromedriver.close()
        d.stop()
        api.stop()
        if failed > 0 or os.environ.get("IDEMHOOK_KEEP_TMP") == "1":
            print(f"kept {tmp} (daemon log: {os.path.join(tmp, 'daemon.log')})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed > 0 or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
