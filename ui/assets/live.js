// leasehold UI: live updates by short polling. Every data-refresh
// milliseconds it fetches the page's own URL, and replaces each element
// carrying data-live by the element of the same id in the answer. After
// each successful update, <html data-updated> counts the updates (tests
// wait on it). It pauses while the tab is hidden and, when an update
// fails, shows the "stale" marker and tries again at the next period.
(function () {
  'use strict';
  var root = document.documentElement;
  var period = parseInt(document.body.getAttribute('data-refresh'), 10);
  if (!(period > 0) || !window.fetch || !window.DOMParser) {
    return;
  }
  var count = 0;
  var timer = null;
  var inflight = false;

  function stale(on) {
    var el = document.getElementById('stale');
    if (el) {
      el.hidden = !on;
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(update, period);
  }

  function update() {
    if (document.hidden || inflight) {
      return; // visibilitychange schedules the next one
    }
    inflight = true;
    fetch(window.location.href, { credentials: 'same-origin', cache: 'no-store', headers: { 'X-Leasehold-Live': '1' } })
      .then(function (resp) {
        if (!resp.ok) {
          throw new Error('HTTP ' + resp.status);
        }
        return resp.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, 'text/html');
        var live = document.querySelectorAll('[data-live]');
        for (var i = 0; i < live.length; i++) {
          var el = live[i];
          if (!el.id) {
            continue;
          }
          var next = fresh.getElementById(el.id);
          if (next) {
            el.replaceWith(document.importNode(next, true));
          }
        }
        count++;
        root.dataset.updated = String(count);
        stale(false);
      })
      .catch(function () {
        stale(true);
      })
      .then(function () {
        inflight = false;
        if (!document.hidden) {
          schedule();
        }
      });
  }

  document.addEventListener('visibilitychange', function () {
    if (!document.hidden) {
      schedule();
    } else {
      clearTimeout(timer);
    }
  });
  schedule();
})();
