// dataloader dashboard script: served as a file so the Content-Security-Policy
// needs no inline script. It adds the CSRF token to htmx requests and forms,
// keeps relative times current, switches to polling when the live stream
// fails, and small conveniences (select all, duplicate timeline items).
(function () {
  'use strict';

  var POLL_MS = 5000;

  function csrf() {
    var m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.getAttribute('content') : '';
  }

  // Every htmx request carries the token as a header; forms rendered for a
  // shared live fragment have an empty _csrf field, filled here.
  document.addEventListener('htmx:configRequest', function (e) {
    var t = csrf();
    if (t) e.detail.headers['X-CSRF-Token'] = t;
  });
  function fillCSRF(root) {
    var t = csrf();
    if (!t || !root.querySelectorAll) return;
    root.querySelectorAll('input[name="_csrf"]').forEach(function (i) {
      if (!i.value) i.value = t;
    });
  }
  document.addEventListener('htmx:load', function (e) { fillCSRF(e.detail.elt); });
  document.addEventListener('submit', function (e) { fillCSRF(e.target); }, true);

  // Relative times: <time datetime data-rel> shows "12 s ago" / "in 3 min";
  // data-age shows the plain duration since the time.
  function dur(ms) {
    var s = Math.floor(Math.abs(ms) / 1000);
    if (s < 60) return s + ' s';
    var m = Math.floor(s / 60);
    if (m < 60) return m + ' min';
    var h = Math.floor(m / 60);
    if (h < 48) return h + ' h ' + String(m % 60).padStart(2, '0') + ' min';
    return Math.floor(h / 24) + ' d ' + (h % 24) + ' h';
  }
  function rel(ms) {
    if (ms >= 0) return ms < 1000 ? 'just now' : dur(ms) + ' ago';
    return -ms < 1000 ? 'now' : 'in ' + dur(ms);
  }
  function tick(all) {
    var now = Date.now();
    var sel = all ? 'time[data-rel], [data-age]' : 'time[data-countdown]';
    document.querySelectorAll(sel).forEach(function (el) {
      var t = Date.parse(el.getAttribute('datetime'));
      if (isNaN(t)) return;
      var text = el.hasAttribute('data-age') ? dur(now - t) : rel(now - t);
      if (el.textContent !== text) el.textContent = text;
    });
  }
  setInterval(function () { tick(false); }, 1000);
  setInterval(function () { tick(true); }, 5000);

  // Live stream state. The SSE extension reports the stream's health with
  // htmx:sseOpen / htmx:sseError. While it is down, the page says so and
  // every live region refreshes itself every 5 s (each has hx-get and
  // hx-trigger="dl:refresh"); once the stream is back, polling stops.
  var pollTimer = null;
  var lastEventId = '';
  function refreshAll() {
    document.querySelectorAll('[data-live]').forEach(function (el) {
      if (window.htmx) htmx.trigger(el, 'dl:refresh');
    });
  }
  function setPolling(on) {
    var notice = document.getElementById('live-notice');
    if (notice) notice.hidden = !on;
    document.body.classList.toggle('is-polling', on);
    if (on && !pollTimer) {
      pollTimer = setInterval(refreshAll, POLL_MS);
    } else if (!on && pollTimer) {
      clearInterval(pollTimer);
      pollTimer = null;
    }
  }
  document.addEventListener('htmx:sseError', function () { setPolling(true); });
  document.addEventListener('htmx:sseOpen', function () { setPolling(false); });
  // (htmx:sseMessage fires on the element the message replaced, which is no
  // longer in the document, so the last id is taken before the swap and the
  // follow-ups run when the new content loads.)
  document.addEventListener('htmx:sseBeforeMessage', function (e) {
    if (e.detail && e.detail.lastEventId) lastEventId = e.detail.lastEventId;
  });
  document.addEventListener('htmx:load', function () {
    dedupeTimeline();
    showNewer();
  });

  // The list's "newer jobs" notice carries the newest matching id; job ids
  // are UUIDv7, so their text order is their creation order.
  function showNewer() {
    var n = document.getElementById('jobs-newer');
    var table = document.getElementById('jobs-table');
    if (!n || !table) return;
    var newest = n.getAttribute('data-newest') || '';
    var top = table.getAttribute('data-top') || '';
    n.hidden = !(newest && newest > top);
  }

  // When the extension opens a new EventSource after a failure it reuses the
  // page's URL; resume from the last message seen instead of the page load.
  // (htmx and its SSE extension load before this file: the scripts are
  // deferred and run in order.)
  if (window.htmx && htmx.createEventSource) {
    var create = htmx.createEventSource;
    htmx.createEventSource = function (url) {
      if (lastEventId) {
        url = url.replace(/([?&])since=[^&]*/, '$1since=' + encodeURIComponent(lastEventId));
      }
      return create(url);
    };
  }

  // A replayed or resynced timeline may repeat events already shown.
  function dedupeTimeline() {
    var tl = document.getElementById('job-timeline');
    if (!tl) return;
    var seen = {};
    Array.prototype.slice.call(tl.children).forEach(function (li) {
      if (!li.id) return;
      if (seen[li.id]) li.remove(); else seen[li.id] = true;
    });
  }

  // Select every row of the page for a bulk action.
  document.addEventListener('change', function (e) {
    if (e.target && e.target.id === 'select-all') {
      document.querySelectorAll('input[name="ids"][form="bulk-form"]').forEach(function (c) {
        c.checked = e.target.checked;
      });
    }
  });

  // Failed htmx requests that carry no fragment to show (403, 404, 500...)
  // are reported in the flash area.
  document.addEventListener('htmx:responseError', function (e) {
    var xhr = e.detail.xhr;
    var area = document.getElementById('flash');
    if (!area || !xhr) return;
    var msg = 'Request failed (' + xhr.status + ')';
    if (xhr.status === 403) msg = 'Not allowed (403): your role does not permit this action, or the page is stale; reload it.';
    var p = document.createElement('p');
    p.className = 'alert alert-error';
    p.setAttribute('role', 'alert');
    p.textContent = msg;
    area.replaceChildren(p);
  });
  document.addEventListener('htmx:sendError', function () {
    var area = document.getElementById('flash');
    if (!area) return;
    var p = document.createElement('p');
    p.className = 'alert alert-error';
    p.setAttribute('role', 'alert');
    p.textContent = 'The server cannot be reached; retry in a moment.';
    area.replaceChildren(p);
  });
})();
