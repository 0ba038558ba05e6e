// The operator page's script (inlined, allowed by its hash). One EventSource on /events (the token,
// when one is needed, as `access_token` in its URL: EventSource cannot send headers); every other
// call uses `Authorization: Bearer`. The token lives in sessionStorage (this tab only).
extension OperatorPage {
    static let script = #"""
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const tbody = $('rows'), conn = $('conn'), notice = $('notice'), addError = $('add-error');
  const rows = new Map();
  const KEY = 'download-service-token';
  let token = sessionStorage.getItem(KEY) || '';
  let source = null, retry = null, generation = 0;
  window.cspViolations = 0;
  document.addEventListener('securitypolicyviolation', () => { window.cspViolations += 1; });

  const headers = (extra) => Object.assign(token ? { Authorization: 'Bearer ' + token } : {}, extra || {});
  // `credentials: 'omit'`: a 401 then never makes the browser prompt for a user name and password
  // (the service also offers Basic auth); the token goes in the Authorization header.
  const call = (path, options) => fetch(path, Object.assign({ credentials: 'omit', cache: 'no-store' }, options || {},
    { headers: headers((options || {}).headers) }));
  const withToken = (path) => token ? path + (path.includes('?') ? '&' : '?') + 'access_token=' + encodeURIComponent(token) : path;
  const setText = (el, text) => { if (el.textContent !== text) el.textContent = text; };

  function bytes(n) {
    if (n == null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return (i === 0 ? String(v) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)) + ' ' + units[i];
  }
  function eta(s) {
    if (s == null || !isFinite(s)) return '—';
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' m ' + String(s % 60).padStart(2, '0') + ' s';
    if (s < 360000) return Math.floor(s / 3600) + ' h ' + String(Math.floor(s % 3600 / 60)).padStart(2, '0') + ' m';
    return '> 99 h';
  }
  // The service's sanitised name once stored; before, the URL's last segment decoded, without the
  // controls and format characters the service drops too (a right-to-left override would show
  // `invoice\u202Efdp.exe` as `invoiceexe.pdf`; a line break would add lines to a dialog).
  function nameOf(s) {
    if (s.fileName) return s.fileName;
    try {
      const u = new URL(s.url);
      const last = u.pathname.split('/').filter(Boolean).pop();
      const name = last ? decodeURIComponent(last).replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, '') : '';
      return name || u.host;
    } catch (e) { return s.url; }
  }
  async function problem(response) {
    try {
      const body = await response.json();
      if (body && body.error && body.error.message) return body.error.message;
    } catch (e) { /* not JSON */ }
    return 'HTTP ' + response.status;
  }
  function needToken(status) {
    if (status === 401 || status === 403) {
      $('auth').hidden = false;
      return true;
    }
    return false;
  }

  function makeRow(id) {
    const tr = document.createElement('tr');
    tr.dataset.id = id;
    const cell = (cls, label) => { const td = document.createElement('td'); td.className = cls; td.dataset.label = label; tr.appendChild(td); return td; };
    const r = { tr, id };
    r.name = document.createElement('span'); cell('file', 'File').appendChild(r.name);
    r.badge = document.createElement('span'); cell('state', 'State').appendChild(r.badge);
    const progress = cell('progress', 'Progress');
    const bar = document.createElement('span'); bar.className = 'bar';
    r.fill = document.createElement('span'); r.fill.className = 'fill'; r.fill.style.display = 'block'; bar.appendChild(r.fill);
    r.pct = document.createElement('span'); r.pct.className = 'pct';
    progress.append(bar, r.pct);
    r.rate = cell('num rate', 'Rate'); r.eta = cell('num eta', 'ETA'); r.size = cell('num size', 'Size');
    r.area = cell('area', 'Area'); r.callers = cell('num callers', 'Callers');
    const acts = document.createElement('div'); acts.className = 'acts'; cell('actions', 'Actions').appendChild(acts);
    r.toggle = document.createElement('button'); r.toggle.type = 'button'; r.toggle.textContent = 'Pause';
    r.remove = document.createElement('button'); r.remove.type = 'button'; r.remove.textContent = 'Remove';
    r.open = document.createElement('a'); r.open.className = 'open gone'; r.open.textContent = 'Open'; r.open.tabIndex = -1;
    r.open.rel = 'noopener noreferrer'; r.open.target = '_blank';
    for (const kind of ['pointerenter', 'focus']) r.open.addEventListener(kind, () => { primeLink(r); });
    r.open.addEventListener('click', (event) => openFile(r, event));
    r.open.addEventListener('auxclick', (event) => { if (event.button === 1) openFile(r, event); });
    acts.append(r.toggle, r.remove, r.open);
    r.toggle.addEventListener('click', () => {
      const resume = r.snap && r.snap.state === 'paused';
      act('POST', '/admin/downloads/' + encodeURIComponent(id) + (resume ? '/resume' : '/pause'), r);
    });
    r.remove.addEventListener('click', () => {
      if (window.confirm('Remove ' + nameOf(r.snap) + '? Its file or partial is deleted.')) {
        act('DELETE', '/admin/downloads/' + encodeURIComponent(id), r);
      }
    });
    return r;
  }

  function render(s) {
    let r = rows.get(s.id);
    if (!r) {
      r = makeRow(s.id);
      rows.set(s.id, r);
      tbody.insertBefore(r.tr, tbody.firstChild);
    }
    r.snap = s;
    r.touched = performance.now();
    setText(r.name, nameOf(s));
    if (r.name.title !== s.url) r.name.title = s.url;
    setText(r.badge, s.state);
    const cls = 'badge ' + s.state;
    if (r.badge.className !== cls) r.badge.className = cls;
    const fraction = s.state === 'completed' ? 1 : s.fraction;
    r.fill.style.transform = 'scaleX(' + (fraction == null ? 0 : Math.min(1, Math.max(0, fraction))) + ')';
    setText(r.pct, fraction == null ? bytes(s.bytesWritten) : (fraction * 100).toFixed(1) + '%');
    const running = s.state === 'downloading';
    setText(r.rate, running && s.bytesPerSecond > 0 ? bytes(Math.round(s.bytesPerSecond)) + '/s' : '—');
    setText(r.eta, running ? eta(s.etaSeconds) : '—');
    setText(r.size, bytes(s.size != null ? s.size : s.bytesExpected));
    setText(r.area, s.storage);
    setText(r.callers, String(s.callers));
    const canToggle = s.state === 'queued' || s.state === 'downloading' || s.state === 'paused';
    setText(r.toggle, s.state === 'paused' ? 'Resume' : 'Pause');
    r.toggle.classList.toggle('gone', !canToggle);
    r.toggle.disabled = !canToggle;
    const done = s.state === 'completed';
    r.open.classList.toggle('gone', !done);
    r.open.tabIndex = done ? 0 : -1;
    if (done) {
      const href = fresh(r) ? r.link.url : '/downloads/' + encodeURIComponent(s.id) + '/file';
      if (r.open.getAttribute('href') !== href) r.open.setAttribute('href', href);
    } else if (r.open.hasAttribute('href')) {
      r.open.removeAttribute('href');
    }
    showEmpty();
  }
  function drop(id) {
    const r = rows.get(id);
    if (!r) return;
    if (r.tr.contains(document.activeElement)) (r.tr.nextSibling || r.tr.previousSibling || $('url')).focus?.();
    r.tr.remove();
    rows.delete(id);
    showEmpty();
  }
  function showEmpty() { $('empty').classList.toggle('hidden', rows.size > 0); }

  // Open: with a token, the file by a link that names this one file and lapses in minutes
  // (`/file-link`), never by one holding the token: a browser keeps the URL of every file it saves,
  // in its download history and in the file's metadata. A link is put behind "Open" as the pointer
  // or the focus reaches it (so "open in new tab", "save link as" and "copy link" get one too); a
  // click or middle click before it came fetches one and saves the file by it.
  const fresh = (r) => r.link && r.link.until - Date.now() > 60000;
  async function fetchLink(r) {
    const response = await call('/downloads/' + encodeURIComponent(r.id) + '/file-link');
    if (!response.ok) {
      needToken(response.status);
      setText(notice, nameOf(r.snap) + ': ' + await problem(response));
      return null;
    }
    const link = await response.json();
    r.link = { url: link.url, until: Date.parse(link.expiresAt) || Date.now() + 240000 };
    if (r.snap && r.snap.state === 'completed') r.open.setAttribute('href', r.link.url);
    return r.link.url;
  }
  async function primeLink(r) {
    if (!token || fresh(r) || r.priming || !(r.snap && r.snap.state === 'completed')) return;
    r.priming = true;
    try { await fetchLink(r); } catch (e) { /* the click asks again */ } finally { r.priming = false; }
  }
  async function openFile(r, event) {
    if (!token || fresh(r)) return;  // The plain link needs no token, or a fresh link is behind it.
    event.preventDefault();
    setText(notice, '');
    try {
      const url = await fetchLink(r);
      if (!url) return;
      const a = document.createElement('a');
      a.href = url; a.download = ''; a.rel = 'noopener noreferrer';
      document.body.appendChild(a);
      a.click();
      a.remove();
    } catch (e) {
      setText(notice, 'The service did not answer: ' + e.message);
    }
  }

  async function act(method, path, r) {
    setText(notice, '');
    try {
      const response = await call(path, { method });
      if (!response.ok) {
        needToken(response.status);
        setText(notice, nameOf(r.snap) + ': ' + await problem(response));
      } else if (method === 'DELETE') {
        drop(r.id);
      } else {
        const body = await response.json().catch(() => null);
        if (body && body.id && body.state) render(body);
      }
    } catch (e) {
      setText(notice, 'The service did not answer: ' + e.message);
    }
  }

  // Rows of downloads gone while the stream was down: the list, asked once the stream is back,
  // names every download (page after page); rows it lacks that no event touched since the question go.
  async function reconcile() {
    const asked = performance.now();
    try {
      const listed = new Set();
      let path = '/downloads';
      for (let pages = 0; path && pages < 1000; pages++) {
        const response = await call(path);
        if (!response.ok) { needToken(response.status); return; }
        const page = await response.json();
        for (const d of page.downloads) listed.add(d.id);
        path = page.next ? '/downloads?after=' + encodeURIComponent(page.next) : null;
      }
      if (path) return;  // more pages than it reads: keep every row
      for (const [id, r] of rows) if (!listed.has(id) && r.touched < asked) drop(id);
    } catch (e) { /* the stream's own retry covers it */ }
  }

  const kinds = ['snapshot', 'created', 'progress', 'resumed', 'paused', 'completed', 'failed'];
  function connect() {
    clearTimeout(retry);
    if (source) source.close();
    const mine = ++generation;
    source = new EventSource(withToken('/events'));
    for (const kind of kinds) {
      source.addEventListener(kind, (e) => { if (mine === generation) render(JSON.parse(e.data)); });
    }
    source.addEventListener('removed', (e) => { if (mine === generation) drop(JSON.parse(e.data).id); });
    source.onopen = () => {
      conn.className = 'conn live';
      setText(conn, 'live');
      reconcile();
    };
    source.onerror = () => {
      conn.className = 'conn';
      if (source.readyState === EventSource.CLOSED) {
        // Refused (a token is needed, or too many watchers): ask why, then try again.
        setText(conn, 'disconnected; retrying…');
        retry = setTimeout(start, 3000);
      } else {
        setText(conn, 'reconnecting…');
      }
    };
  }

  $('add-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    setText(addError, '');
    const url = $('url').value.trim();
    const button = $('add');
    button.disabled = true;
    try {
      const response = await call('/downloads', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ url, storage: $('storage').value }),
      });
      if (!response.ok) {
        needToken(response.status);
        setText(addError, await problem(response));
      } else {
        const body = await response.json();
        render(body);
        $('url').value = '';
      }
    } catch (err) {
      setText(addError, 'The service did not answer: ' + err.message);
    } finally {
      button.disabled = false;
    }
  });
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    token = $('token').value.trim();
    if (token) sessionStorage.setItem(KEY, token); else sessionStorage.removeItem(KEY);
    $('token').value = '';
    setText(notice, '');
    start();
  });
  $('forget').addEventListener('click', () => {
    token = '';
    sessionStorage.removeItem(KEY);
    start();
  });

  // The stream opens once the API takes the token (or needs none): an EventSource refused with 401
  // would only say "error".
  async function start() {
    clearTimeout(retry);
    try {
      const response = await call('/downloads?state=queued');
      if (needToken(response.status)) {
        if (source) source.close();
        conn.className = 'conn';
        setText(conn, token ? 'token refused' : 'token needed');
        $('token').focus();
        return;
      }
      connect();
    } catch (e) {
      setText(conn, 'service unreachable; retrying…');
      retry = setTimeout(start, 3000);
    }
  }

  if (token) $('auth').hidden = false;
  showEmpty();
  start();
  document.body.dataset.ready = 'true';
})();
"""#
}
