// checkout.js: progressive enhancement of the idemhook checkout form.
(function () {
  'use strict';
  var form = document.getElementById('checkout');
  if (!form || !window.fetch || !window.URLSearchParams) { return; }
  var button = form.querySelector('button[type=submit]');
  var statusEl = document.getElementById('status');
  var keyInput = form.elements.idempotency_key;
  var DONE = 'idemhook.checkout.done';
  var busy = false;
  var cameBack = false;
  var nav = performance.getEntriesByType ? performance.getEntriesByType('navigation')[0] : null;
  if (nav && nav.type === 'back_forward') { cameBack = true; }
  window.addEventListener('pageshow', function (e) {
    if (e.persisted) { cameBack = true; busy = false; button.disabled = false; say(''); }
  });
  function say(t) { statusEl.textContent = t; }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }
  function newKey() {
    if (window.crypto && crypto.randomUUID) { return crypto.randomUUID(); }
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    var h = Array.prototype.map.call(b, function (x) { return (x + 0x100).toString(16).slice(1); }).join('');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
  }
  // What the order is, without its key.
  function content() {
    var p = new URLSearchParams(new FormData(form));
    p.delete('idempotency_key');
    p.sort();
    return p.toString();
  }
  // Back + resubmit of an order that went through is that same order: reuse
  // the key it succeeded with. Anything else uses the form's current key.
  function keyFor(c) {
    try {
      var done = JSON.parse(sessionStorage.getItem(DONE) || 'null');
      if (cameBack && done && done.content === c) { return done.key; }
    } catch (e) { /* storage off: the form's key */ }
    return keyInput.value;
  }
  form.addEventListener('submit', async function (ev) {
    ev.preventDefault();
    if (busy) { return; }
    busy = true;
    button.disabled = true;
    var c = content();
    var key = keyFor(c);
    var body = new URLSearchParams(new FormData(form));
    body.set('idempotency_key', key);
    for (var attempt = 0; ; attempt++) {
      say(attempt === 0 ? 'Placing your order\u2026' : 'Retrying (attempt ' + (attempt + 1) + ')\u2026');
      var resp = null;
      try {
        resp = await fetch(form.action, {method: 'POST', body: body, credentials: 'same-origin',
          headers: {'Accept': 'application/json', 'Idempotency-Key': key}});
      } catch (e) { resp = null; }
      if (resp && resp.ok) {
        try { sessionStorage.setItem(DONE, JSON.stringify({key: key, content: c})); } catch (e) { /* ignore */ }
        keyInput.value = newKey();
        say('Order placed.');
        location.assign(resp.url);
        return;
      }
      var retry = !resp || resp.status === 409 || resp.status === 429 || resp.status >= 500;
      if (!retry || attempt >= 5) {
        var msg = 'The network failed, so the order is not confirmed. Submitting again is safe: it cannot be placed twice.';
        if (resp) {
          msg = 'The order could not be placed (HTTP ' + resp.status + ').';
          try { var p = await resp.json(); msg = p.detail || p.title || msg; } catch (e) { /* keep msg */ }
        }
        say(msg);
        busy = false;
        button.disabled = false;
        return;
      }
      var wait = Math.min(8000, 400 * Math.pow(2, attempt)) * (0.75 + Math.random() / 2);
      var ra = resp ? parseInt(resp.headers.get('Retry-After'), 10) : 0;
      if (ra > 0) { wait = Math.max(wait, ra * 1000); }
      await sleep(wait);
    }
  });
})();
