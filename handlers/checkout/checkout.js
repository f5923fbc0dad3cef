// checkout.js: progressive enhancement of the idemhook checkout form.
(function () {
  'use strict';
  var form = document.getElementById('checkout');
  if (!form || !window.fetch || !window.URLSearchParams) { return; }
  var button = form.querySelector('button[type=submit]');
  var statusEl = document.getElementById('status');
  // The form's key, as the server rendered it: every submission of this
  // form sends it, so the script and the plain form post agree (Back and
  // the same form again: the same order; Back and other details: 422).
  var key = form.elements.idempotency_key.value;
  var busy = false;
  window.addEventListener('pageshow', function (e) {
    if (e.persisted) { busy = false; button.disabled = false; say(''); }
  });
  function say(t) { statusEl.textContent = t; statusEl.className = ''; }
  function link(href, id, label) {
    var a = document.createElement('a');
    a.href = href;
    a.id = id;
    a.textContent = label;
    return a;
  }
  // The form was already used for another order (422): the way to that
  // order, and to a fresh form (this one keeps its key).
  function sayPlaced(t, href) {
    say(t + ' ');
    statusEl.className = 'error';
    statusEl.appendChild(link(href, 'placed', 'See the order you placed'));
    statusEl.appendChild(document.createTextNode(' \u00b7 '));
    statusEl.appendChild(link('/checkout', 'new-order', 'Start a new order'));
  }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }
  form.addEventListener('submit', async function (ev) {
    ev.preventDefault();
    if (busy) { return; }
    busy = true;
    button.disabled = true;
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
        say('Order placed.');
        location.assign(resp.url);
        return;
      }
      var retry = !resp || resp.status === 409 || resp.status === 429 || resp.status >= 500;
      if (!retry || attempt >= 5) {
        var msg = 'The network failed, so the order is not confirmed. Submitting again is safe: it cannot be placed twice.';
        var placed = null;
        if (resp) {
          msg = 'The order could not be placed (HTTP ' + resp.status + ').';
          try {
            var p = await resp.json();
            msg = p.detail || p.title || msg;
            if (resp.status === 422 && typeof p.order_url === 'string' && p.order_url.indexOf('/orders/') === 0) {
              placed = p.order_url;
            }
          } catch (e) { /* keep msg */ }
        }
        if (placed) { sayPlaced(msg, placed); } else { say(msg); }
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
