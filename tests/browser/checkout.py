#!/usr/bin/python3
"""checkout.py: the checkout page in headless Chromium, driven by Selenium.

Debian's chromium, chromium-driver and python3-selenium only: no download.
Each scenario must leave exactly one order, counted through GET /api/orders
(demo mode). The browser talks to the daemon through a small proxy started
here, which counts the form's POSTs and, where a scenario asks, loses an
answer on the way back or answers 409 itself: real network faults, on
loopback. Screenshots go to tests/browser/artifacts/.
"""

import http.client
import http.server
import json
import os
import re
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

HERE = os.path.dirname(os.path.abspath(__file__))
ARTIFACTS = os.path.join(HERE, "artifacts")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Without the background-networking flags Chromium keeps trying to reach
# Google's hosts, which a closed network refuses.
FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1000,900",
]
FLASH = "Order created."
WAIT_S = 30

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


# ---- the daemon ----

def start_daemon(bin_path, tmp):
    port_file = os.path.join(tmp, "port")
    ini = "\n".join([
        "[server]", "listen = 127.0.0.1:0", f"port_file = {port_file}", "threads = 4", "",
        "[store]", f"path = {os.path.join(tmp, 'idemhook.db')}", "",
        "[admin]", "listen = off", "",
        "[demo]", "enabled = yes", "",
        "[provider stripe]", "type = stripe", "secret = whsec_browser_test_secret", "",
        "[api]", "rate = 1000", "burst = 1000", "",
    ])
    conf = os.path.join(tmp, "idemhook.ini")
    with open(conf, "w") as f:
        f.write(ini)
    log = open(os.path.join(tmp, "daemon.log"), "ab")
    proc = subprocess.Popen([bin_path, "serve", "-c", conf], stdout=log, stderr=log)
    for _ in range(200):
        if os.path.exists(port_file):
            text = open(port_file).read().strip()
            if text:
                return proc, int(text)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the daemon did not start; see {log.name}")


def stop_daemon(proc):
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---- the proxy between the browser and the daemon ----

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade", "content-length", "host"}


class Proxy:
    """Forwards to the daemon. mode: None, 'drop-first' (the first form POST
    reaches the daemon, its answer is lost: the connection is reset), or
    '409-first' (the first form POST is answered 409 here, never forwarded)."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.mode = None
        self.posts = 0
        self.fetch_modes = []  # Sec-Fetch-Mode of each form POST: navigate, or the script's
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_any(self):
                body = b""
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    body = self.rfile.read(n)
                is_form = self.command == "POST" and self.path.split("?")[0] == "/checkout"
                action = None
                if is_form:
                    with proxy.lock:
                        proxy.posts += 1
                        proxy.fetch_modes.append(self.headers.get("Sec-Fetch-Mode", "-"))
                        if proxy.mode is not None and proxy.posts == 1:
                            action = proxy.mode
                if action == "409-first":
                    problem = json.dumps({"type": "urn:idemhook:problem:request_in_progress",
                                          "title": "in progress", "status": 409}).encode()
                    self.send_response(409)
                    self.send_header("Content-Type", "application/problem+json")
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", str(len(problem)))
                    self.end_headers()
                    self.wfile.write(problem)
                    return
                up = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                headers["Host"] = self.headers.get("Host", "")
                up.request(self.command, self.path, body=body if n else None, headers=headers)
                resp = up.getresponse()
                data = resp.read()
                if action == "drop-first":
                    # The order was created; its answer is lost on the way back.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.close_connection = True
                    up.close()
                    return
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                up.close()

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = handle_any

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self, mode=None):
        with self.lock:
            self.mode = mode
            self.posts = 0
            self.fetch_modes = []

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---- the browser ----
#
# Chromium and ChromeDriver are started here and talk to each other and to
# Selenium over 127.0.0.1 (the DevTools address, debuggerAddress): left to
# themselves they look up "localhost", which a bare root without /etc/hosts
# cannot resolve.

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, cond, proc=None, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up")


class Driver:
    """One ChromeDriver for the whole run."""

    def __init__(self, tmp):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log = open(os.path.join(tmp, "chromedriver.log"), "ab")
        self.proc = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}"], stdout=log,
                                     stderr=log)

        def ready():
            try:
                with urllib.request.urlopen(f"{self.url}/status", timeout=2) as r:
                    return json.loads(r.read())["value"]["ready"]
            except (OSError, ValueError, KeyError):
                return False

        wait_for("chromedriver", ready, self.proc)

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


class Browser:
    """A fresh profile for every browser: no cache, no history, no cookies."""

    def __init__(self, tmp, name, javascript, chromedriver):
        profile = tempfile.mkdtemp(prefix=f"{name}-", dir=tmp)
        if not javascript:
            os.makedirs(os.path.join(profile, "Default"))
            with open(os.path.join(profile, "Default", "Preferences"), "w") as f:
                json.dump({"profile": {"managed_default_content_settings": {"javascript": 2}}}, f)
        log = open(os.path.join(tmp, f"{name}-chromium.log"), "ab")
        self.proc = subprocess.Popen(
            [CHROMIUM] + FLAGS + ["--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                                  f"--user-data-dir={profile}", "about:blank"],
            stdout=log, stderr=log)
        active = os.path.join(profile, "DevToolsActivePort")
        wait_for("chromium", lambda: os.path.exists(active) and open(active).readline().strip(),
                 self.proc)
        devtools = int(open(active).readline())
        opts = webdriver.ChromeOptions()
        opts.add_experimental_option("debuggerAddress", f"127.0.0.1:{devtools}")
        self.driver = webdriver.Remote(command_executor=chromedriver.url, options=opts)
        self.driver.set_page_load_timeout(WAIT_S)

    def quit(self):
        try:
            self.driver.quit()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def shot(driver, name):
    driver.save_screenshot(os.path.join(ARTIFACTS, f"{name}.png"))


def wait_url(driver, pattern):
    WebDriverWait(driver, WAIT_S).until(lambda d: re.search(pattern, d.current_url))
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def back_to_form(driver):
    """Goes back to the form page as a user would: without a script, a
    double-click sends two POSTs, and when the first one's answer is
    already shown as the second goes (a loaded machine), the order page is
    in the history twice, so the user presses Back twice."""
    for _ in range(3):
        driver.back()
        try:
            WebDriverWait(driver, 5).until(
                lambda d: re.search(r"/checkout$", d.current_url))
            break
        except TimeoutException:
            continue
    wait_url(driver, r"/checkout$")


def order_id_of(url):
    m = re.search(r"/orders/(ord_[a-z0-9]+)", url)
    return m.group(1) if m else None


def flash_text(driver):
    found = driver.find_elements(By.ID, "flash")
    return found[0].text.strip() if found else None


class Scenarios:
    def __init__(self, base, daemon_base, proxy):
        self.base = base  # through the proxy
        self.daemon_base = daemon_base
        self.proxy = proxy

    def orders_with_ref(self, ref):
        with urllib.request.urlopen(f"{self.daemon_base}/api/orders", timeout=30) as r:
            body = json.loads(r.read())
        return [o for o in body["orders"] if o.get("customer_ref") == ref]

    def fill_form(self, driver, ref, quantity="1"):
        driver.get(f"{self.base}/checkout")
        Select(driver.find_element(By.NAME, "product")).select_by_value("beans")
        q = driver.find_element(By.NAME, "quantity")
        q.clear()
        q.send_keys(quantity)
        c = driver.find_element(By.NAME, "customer_ref")
        c.clear()
        c.send_keys(ref)

    def key(self, driver):
        return driver.find_element(By.NAME, "idempotency_key").get_attribute("value")

    def script_double_click(self, driver):
        ref = f"dblclick-js-{time.time_ns()}"
        self.proxy.reset()
        self.fill_form(driver, ref)
        shot(driver, "00-checkout-form")
        key1 = self.key(driver)
        ActionChains(driver).double_click(driver.find_element(By.ID, "submit")).perform()
        wait_url(driver, r"/orders/ord_")
        first = order_id_of(driver.current_url)
        shot(driver, "01-double-click-result")
        check("double-click submit (script): one order", len(self.orders_with_ref(ref)) == 1)
        check("double-click submit (script): the button let one request through",
              self.proxy.posts == 1, f"{self.proxy.posts} POSTs")
        check("double-click submit (script): the script posted it",
              self.proxy.fetch_modes != [] and "navigate" not in self.proxy.fetch_modes,
              self.proxy.fetch_modes)
        check("the flash shows after the redirect", flash_text(driver) == FLASH, flash_text(driver))

        driver.refresh()
        shot(driver, "02-reload-result")
        check("reload of the result page: the flash is gone", flash_text(driver) is None)
        check("reload of the result page: still one order", len(self.orders_with_ref(ref)) == 1)

        driver.back()
        wait_url(driver, r"/checkout$")
        shot(driver, "03-back-to-form")
        driver.find_element(By.ID, "submit").click()
        wait_url(driver, r"/orders/ord_")
        shot(driver, "04-back-resubmit-result")
        check("Back + resubmit (script): the same order", order_id_of(driver.current_url) == first,
              f"{first} then {driver.current_url}")
        check("Back + resubmit (script): still one order", len(self.orders_with_ref(ref)) == 1)
        check("Back + resubmit (script): no second flash", flash_text(driver) is None)

        driver.find_element(By.CSS_SELECTOR, 'a[href="/checkout"]').click()
        wait_url(driver, r"/checkout$")
        key2 = self.key(driver)
        check('"Place another order" renders a new key',
              key2 != key1 and re.fullmatch(r"[0-9a-f-]{36}", key2 or "") is not None,
              f"{key1} / {key2}")

    def back_change_resubmit(self, driver, javascript):
        """Back to the form after the order went through, another quantity,
        submit: the 422 docs/order-api.md promises, with or without the
        script, linking to the order already placed; still one order."""
        how = "script" if javascript else "no script"
        ref = f"backchange-{'js' if javascript else 'nojs'}-{time.time_ns()}"
        self.proxy.reset()
        self.fill_form(driver, ref, "1")
        driver.find_element(By.ID, "submit").click()
        wait_url(driver, r"/orders/ord_")
        first = order_id_of(driver.current_url)
        driver.back()
        wait_url(driver, r"/checkout$")
        q = driver.find_element(By.NAME, "quantity")
        q.clear()
        q.send_keys("3")
        driver.find_element(By.ID, "submit").click()
        if javascript:
            WebDriverWait(driver, WAIT_S).until(lambda d: d.find_elements(By.ID, "placed"))
            shot(driver, "09-back-change-resubmit-script")
            status = driver.find_element(By.ID, "status").text
            check(f"Back + other quantity ({how}): the page says the order was already placed",
                  "already placed an order" in status, status)
            fresh = driver.find_elements(By.ID, "new-order")
            check(f"Back + other quantity ({how}): a link to a fresh form",
                  fresh != [] and (fresh[0].get_attribute("href") or "").endswith("/checkout"))
        else:
            WebDriverWait(driver, WAIT_S).until(lambda d: d.find_elements(By.ID, "reused"))
            shot(driver, "10-back-change-resubmit-no-script")
            check(f"Back + other quantity ({how}): the 422 page",
                  driver.find_element(By.TAG_NAME, "h1").text == "This order was already placed",
                  driver.find_element(By.TAG_NAME, "h1").text)
        link = driver.find_element(By.ID, "placed").get_attribute("href") or ""
        check(f"Back + other quantity ({how}): it links to the order already placed",
              link.endswith(f"/orders/{first}"), f"{link} for {first}")
        orders = self.orders_with_ref(ref)
        check(f"Back + other quantity ({how}): still one order, unchanged",
              len(orders) == 1 and orders[0]["amount"] == 2490, json.dumps(orders))
        text = driver.find_element(By.TAG_NAME, "main").text
        check(f"Back + other quantity ({how}): no developer wording in the customer's text",
              "idempotency" not in text.lower() and "Idempotent-Replayed" not in text, text)
        driver.find_element(By.ID, "placed").click()
        wait_url(driver, r"/orders/ord_")
        check(f"Back + other quantity ({how}): the link opens that order",
              order_id_of(driver.current_url) == first, driver.current_url)

    def back_change_script(self, driver):
        self.back_change_resubmit(driver, True)

    def back_change_no_script(self, driver):
        self.back_change_resubmit(driver, False)

    def customer_wording(self, driver):
        """The form speaks of orders; how keys work is behind a disclosure."""
        self.proxy.reset()
        driver.get(f"{self.base}/")
        link = driver.find_element(By.ID, "to-checkout")
        shot(driver, "11-demo-front-door")
        link.click()
        wait_url(driver, r"/checkout$")
        text = driver.find_element(By.TAG_NAME, "main").text
        check("the checkout's text has no developer wording",
              "idempotency" not in text.lower() and "Idempotent-Replayed" not in text, text)
        driver.find_element(By.CSS_SELECTOR, "details.how summary").click()
        text = driver.find_element(By.TAG_NAME, "main").text
        shot(driver, "12-how-this-works-open")
        check('"How this works" opens the explanation', "idempotency key" in text, text)

    def dropped_response(self, driver):
        ref = f"dropped-{time.time_ns()}"
        self.proxy.reset("drop-first")
        self.fill_form(driver, ref, "2")
        driver.find_element(By.ID, "submit").click()
        wait_url(driver, r"/orders/ord_")
        shot(driver, "05-retry-after-dropped-response")
        check("retry after a dropped response: the request went again with the same key",
              self.proxy.posts >= 2, f"{self.proxy.posts} POSTs")
        check("retry after a dropped response: one order", len(self.orders_with_ref(ref)) == 1)
        check("retry after a dropped response: the flash shows once", flash_text(driver) == FLASH,
              flash_text(driver))
        driver.refresh()
        check("retry after a dropped response: gone on reload", flash_text(driver) is None)

    def in_flight_retry(self, driver):
        # A 409 (another submission of this key still in flight) is retried
        # by the script with backoff and the same key.
        ref = f"conflict-{time.time_ns()}"
        self.proxy.reset("409-first")
        self.fill_form(driver, ref)
        button = driver.find_element(By.ID, "submit")
        button.click()
        check("while retrying, the button is disabled", not button.is_enabled())
        wait_url(driver, r"/orders/ord_")
        check("409 is retried: one order", len(self.orders_with_ref(ref)) == 1,
              f"{self.proxy.posts} POSTs")
        check("409 is retried: the second attempt went through", self.proxy.posts == 2,
              f"{self.proxy.posts} POSTs")

    def no_script(self, driver):
        ref = f"noscript-{time.time_ns()}"
        self.proxy.reset()
        self.fill_form(driver, ref)
        ActionChains(driver).double_click(driver.find_element(By.ID, "submit")).perform()
        wait_url(driver, r"/orders/ord_")
        first = order_id_of(driver.current_url)
        shot(driver, "06-no-script-double-click")
        check("no script: the browser itself posted the form",
              self.proxy.posts >= 1 and all(m == "navigate" for m in self.proxy.fetch_modes),
              self.proxy.fetch_modes)
        check("double-click submit (no script): one order", len(self.orders_with_ref(ref)) == 1)

        driver.refresh()
        check("reload (no script): the flash is gone", flash_text(driver) is None)

        back_to_form(driver)
        driver.find_element(By.ID, "submit").click()
        wait_url(driver, r"/orders/ord_")
        shot(driver, "07-no-script-back-resubmit")
        check("Back + resubmit (no script): the same order", order_id_of(driver.current_url) == first,
              f"{first} then {driver.current_url}")
        check("Back + resubmit (no script): still one order", len(self.orders_with_ref(ref)) == 1)

        ref2 = f"noscript-single-{time.time_ns()}"
        self.fill_form(driver, ref2)
        driver.find_element(By.ID, "submit").click()
        wait_url(driver, r"/orders/ord_")
        check("a plain submit (no script) shows the flash once", flash_text(driver) == FLASH,
              flash_text(driver))
        driver.refresh()
        check("and it is gone on reload", flash_text(driver) is None)

    def demo_payment(self, driver):
        ref = f"demo-pay-{time.time_ns()}"
        self.proxy.reset()
        self.fill_form(driver, ref)
        driver.find_element(By.ID, "submit").click()
        wait_url(driver, r"/orders/ord_")
        driver.find_element(By.ID, "pay").click()
        wait_url(driver, r"flash=")
        shot(driver, "08-demo-payment")
        flash = flash_text(driver) or ""
        orders = self.orders_with_ref(ref)
        check("demo payment: the customer reads that the payment was received",
              flash.startswith("Payment received.") and "Idempotent" not in flash, flash)
        how = driver.find_element(By.ID, "flash-how").get_attribute("textContent") or ""
        check("demo payment: the duplicate callback was absorbed (How this works)",
              "Idempotent-Replayed: true" in how, how)
        check("demo payment: the order is paid once, with points",
              len(orders) == 1 and orders[0]["status"] == "paid" and orders[0]["points"] == 24,
              json.dumps(orders))


def main():
    bin_path = os.environ.get("IDEMHOOK_BIN")
    if not bin_path:
        print("checkout.py: IDEMHOOK_BIN is not set")
        return 1
    os.makedirs(ARTIFACTS, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="idemhook-browser-")
    proc, port = start_daemon(bin_path, tmp)
    proxy = Proxy(port)
    s = Scenarios(f"http://127.0.0.1:{proxy.port}", f"http://127.0.0.1:{port}", proxy)
    scenarios = [
        ("script", True, s.script_double_click),
        ("dropped", True, s.dropped_response),
        ("conflict", True, s.in_flight_retry),
        ("noscript", False, s.no_script),
        ("backchange-script", True, s.back_change_script),
        ("backchange-noscript", False, s.back_change_no_script),
        ("wording", True, s.customer_wording),
        ("demo", True, s.demo_payment),
    ]
    chromedriver = None
    try:
        chromedriver = Driver(tmp)
        for name, javascript, fn in scenarios:
            browser = None
            try:
                browser = Browser(tmp, name, javascript, chromedriver)
                fn(browser.driver)
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
        proxy.close()
        stop_daemon(proc)
        if failed > 0 or os.environ.get("IDEMHOOK_KEEP_TMP") == "1":
            print(f"kept {tmp} (daemon log: {os.path.join(tmp, 'daemon.log')})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed > 0 or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
