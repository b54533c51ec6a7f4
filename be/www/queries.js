// The /queries page: renders GET /queries?json with DOM APIs. Every value from the server
// goes through textContent or a data-* attribute and is never parsed as HTML, so statement
// text and user names cannot inject markup or script (the Content-Security-Policy forbids
// inline script too).
// The filters, sort and page go to the server, which answers only the rows shown. A refresh
// replaces only the cells whose content changed, so a text selection in the others survives.
'use strict';

const REFRESH_MS = 2000;
const USER_KEY = 'qr.debug.user';

/// query_id -> full statement text once loaded ('' while loading).
const fullStatements = new Map();
/// query ids whose full statement is shown.
const expanded = new Set();
/// query ids with a cancel request in flight.
const cancelling = new Set();
let lastData = null;
/// The completed list's page: the cursor of the shown page (null: the first), the rows shown
/// before it (a partial search's pages hold fewer than the limit), and the same of the pages
/// before it, for Previous.
let pageCursor = null;
let pageOffset = 0;
const previousCursors = [];
let refreshTimer = null;
let refreshing = false;
/// A refresh was asked for while one was running: run another when it ends.
let refreshAgain = false;

/// Local time of an ISO timestamp: "14:03:07" today, "2024-05-01 14:03:07" otherwise.
function formatTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === new Date().toDateString()) return time;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

function timeCell(iso) {
  const td = el('td', 'time', formatTime(iso));
  if (iso) td.title = iso;
  return td;
}

function stateBadge(state) {
  const td = el('td');
  td.append(el('span', `badge state state-${String(state).toLowerCase()}`, state));
  return td;
}

/// The id, allowed to wrap after its ':' so that narrow windows keep the statement visible.
/// It links to the query's own page.
function idCell(q) {
  const td = el('td', 'id');
  const a = el('a', 'query-link');
  a.href = `/query_detail?query_id=${encodeURIComponent(q.query_id)}`;
  const code = el('code');
  const colon = q.query_id.indexOf(':');
  code.append(q.query_id.slice(0, colon + 1), document.createElement('wbr'),
              q.query_id.slice(colon + 1));
  a.append(code);
  td.append(a);
  return td;
}

/// The statement cell: the truncated text, and a toggle loading the full text on demand.
function statementCell(q) {
  const td = el('td', 'stmt-col');
  const full = fullStatements.get(q.query_id);
  const showFull = expanded.has(q.query_id) && full;
  const shown = showFull ? full : (q.statement_truncated ? `${q.statement}…` : q.statement);
  td.append(el('code', 'stmt', shown));
  if (q.statement_truncated) {
    const label = showFull ? 'Show less'
        : (expanded.has(q.query_id) ? 'Loading…'
                                    : `Show full (${formatCount(q.statement_length)} chars)`);
    const b = el('button', 'link', label);
    b.type = 'button';
    b.addEventListener('click', () => toggleStatement(q.query_id));
    td.append(b);
  }
  return td;
}

async function toggleStatement(id) {
  if (expanded.has(id)) {
    expanded.delete(id);
    render();
    return;
  }
  expanded.add(id);
  render();
  if (!fullStatements.get(id)) {
    const resp = await fetch(`/query_statement?query_id=${encodeURIComponent(id)}`);
    if (resp.ok) {
      fullStatements.set(id, await resp.text());
    } else {
      expanded.delete(id);
      showNotice(`Cannot load the statement of ${id}: ${await errorText(resp)}`, 'error');
    }
    render();
  }
}

function cancelButton(q) {
  const td = el('td', 'actions');
  const b = el('button', 'danger', cancelling.has(q.query_id) ? 'Canceling…' : 'Cancel');
  b.type = 'button';
  b.dataset.queryId = q.query_id;
  b.disabled = cancelling.has(q.query_id);
  b.addEventListener('click', () => cancelQuery(q.query_id));
  td.append(b);
  return td;
}

async function cancelQuery(id) {
  const user = document.getElementById('user').value.trim();
  if (!user) {
    showNotice('Enter your user name under “Acting as” (top right) to cancel a query.',
               'error');
    document.getElementById('user').focus();
    return;
  }
  cancelling.add(id);
  render();
  await postCancel(id, user);
  cancelling.delete(id);
  await refresh();
}

// The source, with the client's info and tags under it (the same in both tables).
function sourceCell(q) {
  const td = el('td', 'source', q.source);
  if (q.client_tags && q.client_tags.length > 0) {
    td.append(el('div', 'client-tags', q.client_tags.join(', ')));
  }
  if (q.client_info) td.title = `client info: ${q.client_info}`;
  return td;
}

// The executor's CPU time so far; its SQLite VM steps (the progress of a query that has no
// rows yet, such as an aggregate) on hover.
function cpuCell(q) {
  const td = el('td', 'num', formatDuration(q.cpu_ms));
  td.title = `${formatCount(q.vm_steps)} SQLite VM steps`;
  return td;
}

function inFlightRow(q) {
  const tr = el('tr');
  tr.dataset.queryId = q.query_id;
  tr.append(idCell(q), el('td', 'user', q.user), sourceCell(q), stateBadge(q.state),
            timeCell(q.start_time), el('td', 'num', formatDuration(q.duration_ms)),
            el('td', 'num', formatCount(q.rows_fetched)),
            el('td', 'num', formatCount(q.rows_produced)), cpuCell(q), statementCell(q),
            cancelButton(q));
  return tr;
}

function errorCell(q) {
  const td = el('td', 'error');
  if (q.error) {
    td.append(el('span', 'error-name', q.error.name), el('span', 'error-message', q.error.message));
    td.title = `${q.error.type}, code ${q.error.code}`;
  }
  return td;
}

function completedRow(q) {
  const tr = el('tr');
  tr.dataset.queryId = q.query_id;
  tr.append(idCell(q), el('td', 'user', q.user), sourceCell(q), stateBadge(q.state),
            timeCell(q.start_time), timeCell(q.end_time),
            el('td', 'num', formatDuration(q.duration_ms)),
            el('td', 'num', formatCount(q.rows_fetched)), errorCell(q), statementCell(q));
  return tr;
}

/// Sets 'node''s text only when it differs (an unchanged node keeps its selection).
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/// Makes 'parent''s children equal to 'fresh' (new nodes), keeping every existing child whose
/// markup is the same: only what changed is replaced. 'key' names a child (rows: the query
/// id), so a row that moved is moved, not rebuilt.
function reconcile(parent, fresh, key) {
  const old = new Map();
  for (const child of parent.children) old.set(key(child), child);
  fresh.forEach((node, i) => {
    let keep = old.get(key(node));
    if (keep) {
      old.delete(key(node));
      if (keep.children.length === node.children.length && keep.className === node.className) {
        // Same row: swap only the cells whose markup changed.
        [...node.children].forEach((cell, j) => {
          const mine = keep.children[j];
          if (mine.outerHTML !== cell.outerHTML) keep.replaceChild(cell, mine);
        });
      } else {
        keep.replaceWith(node);
        keep = node;
      }
    } else {
      keep = node;
    }
    if (parent.children[i] !== keep) parent.insertBefore(keep, parent.children[i] || null);
  });
  for (const gone of old.values()) gone.remove();
}

function renderSummary(s) {
  const cards = [
    ['In flight', s.in_flight, ''], ['Running', s.running, 'running'],
    ['Queued', s.queued, 'queued'], ['Completed (matching)', s.completed_in_log, ''],
    ['Submitted', s.submitted_total, ''], ['Finished', s.finished_total, 'finished'],
    ['Failed', s.failed_total, 'failed'], ['Canceled', s.canceled_total, 'canceled'],
  ];
  reconcile(document.getElementById('summary'), cards.map(([label, value, kind]) => {
    const card = el('div', `card ${kind}`);
    card.dataset.key = label;
    card.append(el('div', 'value', formatCount(value)), el('div', 'label', label));
    return card;
  }), (n) => n.dataset.key);
}

function renderTable(id, rows, makeRow, matched) {
  reconcile(document.querySelector(`#${id} tbody`), rows.map(makeRow),
            (n) => n.dataset.queryId);
  document.getElementById(`${id}-empty`).hidden = rows.length > 0;
  setText(document.getElementById(`${id}-count`),
          matched > rows.length ? `${rows.length} of ${formatCount(matched)}`
                                : String(rows.length));
}

function renderPager() {
  const shown = lastData.completed.length;
  const first = pageOffset + (shown > 0 ? 1 : 0);
  setText(document.getElementById('completed-range'),
          shown > 0 ? `${formatCount(first)}–${formatCount(first + shown - 1)}` : '');
  document.getElementById('page-next').disabled = !lastData.next_cursor;
  document.getElementById('page-prev').disabled = previousCursors.length === 0;
  document.getElementById('page-first').disabled = previousCursors.length === 0;
}

/// In a cluster: the cluster/local switch, and which members did not answer.
function renderCluster() {
  const clustered = Boolean(lastData.scope);
  document.getElementById('scope-switch').hidden = !clustered;
  if (clustered) document.getElementById('f-scope').value = lastData.scope === 'local' ? 'local' : 'cluster';
  const failed = (lastData.members || []).filter((m) => !m.ok);
  const notice = document.getElementById('members-notice');
  notice.hidden = failed.length === 0;
  setText(notice, failed.length === 0 ? '' :
      `${failed.length} of ${lastData.members.length} members did not answer; their queries are ` +
      `missing: ${failed.map((m) => `member ${m.id} (${m.uri}): ${m.error}`).join('; ')}`);
}

/// A text search over the history that stopped at its budget (--queries_max_limit) before
/// filling the page: say so, and offer to go on from where it stopped (its next_cursor).
function renderPartial() {
  const partial = Boolean(lastData.completed_partial) && Boolean(lastData.next_cursor);
  document.getElementById('completed-partial').hidden = !partial;
  if (!partial) return;
  const found = lastData.completed.length;
  setText(document.getElementById('completed-partial-text'),
          `The search stopped early: it reads a bounded number of records of the query ` +
          `history per request, and found ${found === 0 ? 'no match' : `${found} ` +
          `match${found === 1 ? '' : 'es'}`} so far on this page. Older records are not ` +
          `searched yet.`);
}

/// Follows the cursor of the shown answer (Next, and Continue after a partial search).
function nextPage() {
  if (!lastData || !lastData.next_cursor) return;
  previousCursors.push({cursor: pageCursor, offset: pageOffset});
  pageCursor = lastData.next_cursor;
  pageOffset += lastData.completed.length;
  refresh();
}

function render() {
  if (!lastData) return;
  renderCluster();
  renderSummary(lastData.summary);
  renderTable('in-flight', lastData.in_flight, inFlightRow, lastData.in_flight_matched);
  renderTable('completed', lastData.completed, completedRow, lastData.completed_matched);
  renderPager();
  renderPartial();
  setText(document.getElementById('stmt-size'), String(lastData.query_stmt_size));
  setText(document.getElementById('updated'), `Updated ${formatTime(lastData.generated_at)}`);
}

/// A datetime-local value (local time) as milliseconds since the epoch; '' when empty.
function localToMs(value) {
  if (!value) return '';
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? '' : String(ms);
}

/// The query string of /queries?json for the filters, the sort and the page.
function listUrl() {
  const p = new URLSearchParams();
  p.set('json', '1');
  const value = (id) => document.getElementById(id).value.trim();
  if (value('f-state')) p.set('state', value('f-state'));
  if (value('f-user')) p.set('user', value('f-user'));
  if (value('f-source')) p.set('source', value('f-source'));
  if (value('f-q')) p.set('q', value('f-q'));
  if (localToMs(value('f-since'))) p.set('since', localToMs(value('f-since')));
  if (localToMs(value('f-until'))) p.set('until', localToMs(value('f-until')));
  p.set('sort', value('f-sort'));
  p.set('order', value('f-order'));
  p.set('limit', value('f-limit'));
  if (pageCursor) p.set('cursor', pageCursor);
  if (!document.getElementById('scope-switch').hidden) p.set('scope', value('f-scope'));
  return `/queries?${p.toString()}`;
}

/// A filter changed: back to the first page.
function filtersChanged() {
  pageCursor = null;
  pageOffset = 0;
  previousCursors.length = 0;
  refresh();
}

async function refresh() {
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  refreshAgain = false;
  clearTimeout(refreshTimer);
  try {
    const resp = await fetch(listUrl(), {cache: 'no-store'});
    if (!resp.ok) throw new Error(`HTTP ${resp.status}: ${await errorText(resp)}`);
    lastData = await resp.json();
    render();
  } catch (e) {
    showNotice(`Cannot load /queries?json: ${e.message}`, 'error');
  } finally {
    refreshing = false;
    if (refreshAgain) {
      refresh();
    } else if (document.getElementById('auto-refresh').checked) {
      refreshTimer = setTimeout(refresh, REFRESH_MS);
    }
  }
}

function init() {
  const user = document.getElementById('user');
  user.value = localStorage.getItem(USER_KEY) || '';
  user.addEventListener('input', () => localStorage.setItem(USER_KEY, user.value.trim()));
  document.getElementById('refresh-now').addEventListener('click', refresh);
  const form = document.getElementById('filters');
  form.addEventListener('submit', (e) => { e.preventDefault(); filtersChanged(); });
  form.addEventListener('reset', () => setTimeout(filtersChanged));
  let typing = null;
  for (const input of form.querySelectorAll('input, select')) {
    input.addEventListener(input.tagName === 'SELECT' || input.type === 'datetime-local'
                               ? 'change' : 'input', () => {
      clearTimeout(typing);
      typing = setTimeout(filtersChanged, 250);
    });
  }
  document.getElementById('page-next').addEventListener('click', nextPage);
  document.getElementById('search-continue').addEventListener('click', nextPage);
  document.getElementById('page-prev').addEventListener('click', () => {
    if (previousCursors.length === 0) return;
    ({cursor: pageCursor, offset: pageOffset} = previousCursors.pop());
    refresh();
  });
  document.getElementById('page-first').addEventListener('click', () => {
    pageCursor = null;
    pageOffset = 0;
    previousCursors.length = 0;
    refresh();
  });
  document.getElementById('auto-refresh').addEventListener('change', (e) => {
    if (e.target.checked) refresh(); else clearTimeout(refreshTimer);
  });
  refresh();
}

document.addEventListener('DOMContentLoaded', init);
