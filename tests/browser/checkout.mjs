// checkout.mjs: the checkout page in headless Chromium. Each scenario must
// leave exactly one order, counted through GET /api/orders (demo mode).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, 'artifacts');
const bin = process.env.IDEMHOOK_BIN;
const CHROMIUM = '/usr/bin/chromium';
const FLAGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const FLASH = 'Order created.';

let passed = 0;
let failed = 0;
let base = '';

function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log(`ok - ${name}`);
  } else {
    failed++;
    console.log(`FAIL - ${name}${detail ? ': ' + detail : ''}`);
  }
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// ---- the daemon ----

async function startDaemon(dir) {
  const portFile = join(dir, 'port');
  const ini = [
    '[server]', 'listen = 127.0.0.1:0', `port_file = ${portFile}`, 'threads = 4', '',
    '[store]', `path = ${join(dir, 'idemhook.db')}`, '',
    '[admin]', 'listen = off', '',
    '[demo]', 'enabled = yes', '',
    '[provider stripe]', 'type = stripe', 'secret = whsec_browser_test_secret', '',
    '[api]', 'rate = 1000', 'burst = 1000', '',
  ].join('\n');
  writeFileSync(join(dir, 'idemhook.ini'), ini);
  const log = join(dir, 'daemon.log');
  const { openSync } = await import('node:fs');
  const fd = openSync(log, 'a');
  const child = spawn(bin, ['serve', '-c', join(dir, 'idemhook.ini')], { stdio: ['ignore', fd, fd] });
  for (let i = 0; i < 200; i++) {
    if (existsSync(portFile)) {
      const port = readFileSync(portFile, 'utf8').trim();
      if (port !== '') {
        return { child, port, log };
      }
    }
    if (child.exitCode !== null) {
      break;
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error(`the daemon did not start; see ${log}:\n${existsSync(log) ? readFileSync(log, 'utf8') : ''}`);
}

async function stopDaemon(d) {
  if (d.child.exitCode !== null) {
    return;
  }
  const done = new Promise((r) => d.child.once('exit', r));
  d.child.kill('SIGTERM');
  const t = setTimeout(() => d.child.kill('SIGKILL'), 10000);
  await done;
  clearTimeout(t);
}

// ---- helpers ----

async function ordersWithRef(ref) {
  const resp = await fetch(`${base}/api/orders`);
  const body = await resp.json();
  return body.orders.filter((o) => o.customer_ref === ref);
}

async function launch(profileRoot, name, javaScriptEnabled) {
  // A fresh profile for every browser: no cache, no history, no cookies.
  const profile = mkdtempSync(join(profileRoot, `${name}-`));
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    javaScriptEnabled,
  });
}

async function shot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
}

// The form posts to /checkout (its action carries a query; see checkout.c).
const CHECKOUT_URL = /\/checkout(\?[^#]*)?$/;

function isCheckoutPost(req) {
  return req.method() === 'POST' && new URL(req.url()).pathname === '/checkout';
}

function orderIdOf(url) {
  const m = /\/orders\/(ord_[a-z0-9]+)/.exec(url);
  return m ? m[1] : null;
}

async function fillForm(page, ref, quantity = '1') {
  await page.goto(`${base}/checkout`);
  await page.selectOption('select[name=product]', 'beans');
  await page.fill('input[name=quantity]', quantity);
  await page.fill('input[name=customer_ref]', ref);
}

async function flashText(page) {
  const el = await page.$('#flash');
  return el ? (await el.textContent()).trim() : null;
}

// ---- scenarios ----

async function scenarioScriptDoubleClick(ctx) {
  const page = await ctx.newPage();
  const ref = `dblclick-js-${Date.now()}`;
  let posts = 0;
  page.on('request', (r) => { if (isCheckoutPost(r)) posts++; });
  await fillForm(page, ref);
  await shot(page, '00-checkout-form');
  const key1 = await page.inputValue('input[name=idempotency_key]');
  await page.dblclick('#submit');
  await page.waitForURL(/\/orders\/ord_/);
  await page.waitForLoadState('load');
  const first = orderIdOf(page.url());
  await shot(page, '01-double-click-result');
  check('double-click submit (script): one order', (await ordersWithRef(ref)).length === 1);
  check('double-click submit (script): the button let one request through', posts === 1, `${posts} POSTs`);
  check('the flash shows after the redirect', (await flashText(page)) === FLASH, await flashText(page));

  await page.reload();
  await shot(page, '02-reload-result');
  check('reload of the result page: the flash is gone', (await flashText(page)) === null);
  check('reload of the result page: still one order', (await ordersWithRef(ref)).length === 1);

  await page.goBack();
  await page.waitForURL(/\/checkout$/);
  await shot(page, '03-back-to-form');
  await page.click('#submit');
  await page.waitForURL(/\/orders\/ord_/);
  await page.waitForLoadState('load');
  await shot(page, '04-back-resubmit-result');
  check('Back + resubmit (script): the same order', orderIdOf(page.url()) === first, `${first} then ${page.url()}`);
  check('Back + resubmit (script): still one order', (await ordersWithRef(ref)).length === 1);
  check('Back + resubmit (script): no second flash', (await flashText(page)) === null);

  await page.click('a[href="/checkout"]');
  await page.waitForURL(/\/checkout$/);
  const key2 = await page.inputValue('input[name=idempotency_key]');
  check('"Place another order" renders a new key', key2 !== key1 && /^[0-9a-f-]{36}$/.test(key2), `${key1} / ${key2}`);
  await page.close();
}

async function scenarioDroppedResponse(ctx) {
  const page = await ctx.newPage();
  const ref = `dropped-${Date.now()}`;
  let posts = 0;
  let dropped = false;
  await page.route(CHECKOUT_URL, async (route) => {
    const req = route.request();
    if (!isCheckoutPost(req)) {
      return route.continue();
    }
    posts++;
    if (!dropped) {
      // The order is created, and its answer is lost on the way back.
      dropped = true;
      const resp = await route.fetch({ maxRedirects: 0 });
      check('dropped response: the first attempt reached the server', resp.status() === 303, `${resp.status()}`);
      return route.abort('connectionreset');
    }
    return route.continue();
  });
  await fillForm(page, ref, '2');
  await page.click('#submit');
  await page.waitForURL(/\/orders\/ord_/, { timeout: 30000 });
  await page.waitForLoadState('load');
  await shot(page, '05-retry-after-dropped-response');
  check('retry after a dropped response: the script retried with the same key', posts >= 2, `${posts} POSTs`);
  check('retry after a dropped response: one order', (await ordersWithRef(ref)).length === 1);
  check('retry after a dropped response: the flash shows once', (await flashText(page)) === FLASH);
  await page.reload();
  check('retry after a dropped response: gone on reload', (await flashText(page)) === null);
  await page.close();
}

async function scenarioInFlightRetry(ctx) {
  // A 409 (another submission of this key still in flight) is retried by
  // the script with backoff and the same key.
  const page = await ctx.newPage();
  const ref = `conflict-${Date.now()}`;
  let posts = 0;
  await page.route(CHECKOUT_URL, async (route) => {
    const req = route.request();
    if (!isCheckoutPost(req)) {
      return route.continue();
    }
    posts++;
    if (posts === 1) {
      return route.fulfill({
        status: 409,
        headers: { 'Content-Type': 'application/problem+json', 'Retry-After': '1' },
        body: JSON.stringify({ type: 'urn:idemhook:problem:request_in_progress', title: 'in progress', status: 409 }),
      });
    }
    return route.continue();
  });
  await fillForm(page, ref);
  await page.click('#submit');
  check('while retrying, the button is disabled', await page.isDisabled('#submit'));
  await page.waitForURL(/\/orders\/ord_/, { timeout: 30000 });
  check('409 is retried: one order', (await ordersWithRef(ref)).length === 1, `${posts} POSTs`);
  await page.close();
}

async function scenarioNoScript(ctx) {
  const page = await ctx.newPage();
  const ref = `noscript-${Date.now()}`;
  await fillForm(page, ref);
  await page.dblclick('#submit');
  await page.waitForURL(/\/orders\/ord_/);
  await page.waitForLoadState('load');
  const first = orderIdOf(page.url());
  await shot(page, '06-no-script-double-click');
  check('double-click submit (no script): one order', (await ordersWithRef(ref)).length === 1);

  await page.reload();
  check('reload (no script): the flash is gone', (await flashText(page)) === null);

  await page.goBack();
  await page.waitForURL(/\/checkout$/);
  await page.click('#submit');
  await page.waitForURL(/\/orders\/ord_/);
  await page.waitForLoadState('load');
  await shot(page, '07-no-script-back-resubmit');
  check('Back + resubmit (no script): the same order', orderIdOf(page.url()) === first, `${first} then ${page.url()}`);
  check('Back + resubmit (no script): still one order', (await ordersWithRef(ref)).length === 1);
  await page.close();

  const fresh = await ctx.newPage();
  const ref2 = `noscript-single-${Date.now()}`;
  await fillForm(fresh, ref2);
  await fresh.click('#submit');
  await fresh.waitForURL(/\/orders\/ord_/);
  check('a plain submit (no script) shows the flash once', (await flashText(fresh)) === FLASH);
  await fresh.reload();
  check('and it is gone on reload', (await flashText(fresh)) === null);
  await fresh.close();
}

async function scenarioDemoPayment(ctx) {
  const page = await ctx.newPage();
  const ref = `demo-pay-${Date.now()}`;
  await fillForm(page, ref);
  await page.click('#submit');
  await page.waitForURL(/\/orders\/ord_/);
  await page.waitForLoadState('load');
  await page.click('#pay');
  await page.waitForURL(/flash=/);
  await page.waitForLoadState('load');
  await shot(page, '08-demo-payment');
  const flash = (await flashText(page)) || '';
  const orders = await ordersWithRef(ref);
  check('demo payment: the duplicate callback was absorbed', flash.includes('Idempotent-Replayed: true'), flash);
  check('demo payment: the order is paid once, with points',
    orders.length === 1 && orders[0].status === 'paid' && orders[0].points === 24,
    JSON.stringify(orders));
  await page.close();
}

async function main() {
  if (!bin) {
    console.log('checkout.mjs: IDEMHOOK_BIN is not set');
    process.exit(1);
  }
  const dir = mkdtempSync(join(tmpdir(), 'idemhook-browser-'));
  const daemon = await startDaemon(dir);
  base = `http://127.0.0.1:${daemon.port}`;
  const scenarios = [
    ['script', true, scenarioScriptDoubleClick],
    ['dropped', true, scenarioDroppedResponse],
    ['conflict', true, scenarioInFlightRetry],
    ['noscript', false, scenarioNoScript],
    ['demo', true, scenarioDemoPayment],
  ];
  try {
    for (const [name, js, fn] of scenarios) {
      const ctx = await launch(dir, name, js);
      try {
        await fn(ctx);
      } catch (e) {
        check(`scenario ${name} ran to the end`, false, e.message.split('\n')[0]);
        for (const p of ctx.pages()) {
          await p.screenshot({ path: join(artifacts, `failed-${name}.png`) }).catch(() => {});
        }
      } finally {
        await ctx.close();
      }
    }
  } finally {
    await stopDaemon(daemon);
    if (failed > 0 || process.env.IDEMHOOK_KEEP_TMP === '1') {
      console.log(`kept ${dir} (daemon log: ${daemon.log})`);
    } else {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed > 0 ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL - setup: ${e.message}`);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
