// console.js: progressive enhancement for the operator console. Every page
// and action works without it; with it, forms marked data-confirm ask
// first, and pages marked data-refresh reload their main part in place.
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var text = form.getAttribute("data-confirm");
    if (text && !window.confirm(text)) {
      e.preventDefault();
    }
  });
  var main = document.querySelector("main[data-refresh]");
  if (!main || !window.fetch) {
    return;
  }
  var every = parseInt(main.getAttribute("data-refresh"), 10) * 1000;
  function refresh() {
    if (document.hidden) {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", redirect: "error" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("main");
        if (fresh) {
          main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes));
          // a page that no longer asks for it (an order whose reconcile
          // run ended) stops reloading
          if (!fresh.hasAttribute("data-refresh")) {
            window.clearInterval(timer);
          }
        }
      })
      .catch(function () { /* the next tick tries again */ });
  }
  var timer = window.setInterval(refresh, every);
})();
