// The per-query page (/query_detail?query_id=ID): renders GET /query_detail?json and
// /query_plan with DOM APIs only; every server value goes through textContent, never HTML.
// While the query runs, the page refreshes every 2 s and changes only the fields whose text
// changed (a selection in the statement survives).
'use strict';

const REFRESH_MS = 2000;
const USER_KEY = 'qr.debug.user';

const queryId = new URLSearchParams(window.location.search).get('query_id') || '';
let statementKey = null;
let refreshTimer = null;
let terminal = false;

function setText(id, text) {
  const node = document.getElementById(id);
  const value = text === null || text === undefined ? '' : String(text);
  if (node.textContent !== value) node.textContent = value;
}

/// "2024-05-01 14:03:07.123 (local)", or a dash when the point was not reached.
function formatTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
         `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.` +
         `${pad(d.getMilliseconds(), 3)}`;
}

/// The statement, with the character at the error's line and column (1-based, in code
/// points) marked. Rebuilt only when the text or the position changes.
function renderStatement(q) {
  const line = q.error ? q.error.line : null;
  const column = q.error ? q.error.column : null;
  const key = `${line}:${column}`;
  if (statementKey === key) return;
  statementKey = key;
  const pre = document.getElementById('statement');
  if (!line || !column) {
    pre.replaceChildren(q.statement);
    return;
  }
  const lines = q.statement.split('\n');
  const before = lines.slice(0, line - 1).join('\n') + (line > 1 ? '\n' : '');
  const chars = Array.from(lines[line - 1] || '');
  const after = lines.slice(line).join('\n');
  pre.replaceChildren(before + chars.slice(0, column - 1).join(''),
                      el('mark', 'error-at', chars[column - 1] || ' '),
                      chars.slice(column).join('') + (line < lines.length ? '\n' : '') + after);
}

function render(q) {
  setText('query-id', q.query_id);
  const badge = document.getElementById('state');
  setText('state', q.state);
  badge.className = `badge state state-${q.state.toLowerCase()}`;
  document.getElementById('cancel').hidden = q.terminal;
  setText('statement-length', `${formatCount(q.statement_length)} chars`);
  renderStatement(q);
  document.getElementById('error-panel').hidden = !q.error;
  if (q.error) {
    setText('error-name', q.error.name);
    setText('error-type', `${q.error.type}, ${q.error.code}`);
    setText('error-message', q.error.message);
    setText('error-position', q.error.line ? `line ${q.error.line}, column ${q.error.column}`
                                           : '—');
  }
  const t = q.timeline;
  setText('t-submitted', formatTime(t.submitted));
  setText('t-queued', formatDuration(t.queued_ms));
  setText('t-executor', formatTime(t.executor_started));
  setText('t-first-row', formatTime(t.first_row));
  setText('t-finished', formatTime(t.finished));
  setText('t-elapsed', formatDuration(t.elapsed_ms));
  setText('canceled-by', q.canceled_by || '—');
  const c = q.counters;
  setText('c-rows', formatCount(c.rows_fetched));
  setText('c-bytes', formatCount(c.bytes_fetched));
  setText('c-produced', formatCount(c.rows_produced));
  setText('c-cpu', formatDuration(c.cpu_ms));
  setText('c-steps', formatCount(c.vm_steps));
  setText('c-blocked', q.blocked_reason || '—');
  setText('s-user', q.user);
  setText('s-principal', q.principal || '—');
  setText('s-source', q.source || '—');
  setText('s-client-info', q.client_info || '—');
  setText('s-tags', q.client_tags.length ? q.client_tags.join(', ') : '—');
  setText('s-address', q.client_address || '—');
  const s = q.session;
  setText('s-catalog', s.catalog || s.schema ? `${s.catalog || '—'}.${s.schema || '—'}` : '—');
  const props = Object.entries(s.properties).map(([k, v]) => `${k}=${v}`);
  setText('s-properties', props.length ? props.join(', ') : '—');
  setText('s-prepared', s.prepared_statements.length ? s.prepared_statements.join(', ') : '—');
}

async function refresh() {
  clearTimeout(refreshTimer);
  try {
    const resp = await fetch(`/query_detail?json&query_id=${encodeURIComponent(queryId)}`,
                             {cache: 'no-store'});
    if (!resp.ok) {
      showNotice(`Cannot load query ${queryId}: ${await errorText(resp)}`, 'error');
      return;
    }
    const q = await resp.json();
    render(q);
    terminal = q.terminal;
    setText('updated', `Updated ${formatTime(new Date().toISOString())}`);
  } catch (e) {
    showNotice(`Cannot load the query: ${e.message}`, 'error');
  }
  if (!terminal) refreshTimer = setTimeout(refresh, REFRESH_MS);
}

async function loadPlan() {
  const pre = document.getElementById('plan');
  try {
    const resp = await fetch(`/query_plan?query_id=${encodeURIComponent(queryId)}`,
                             {cache: 'no-store'});
    if (!resp.ok) {
      pre.textContent = `Cannot explain: ${await errorText(resp)}`;
      return;
    }
    const r = await resp.json();
    pre.textContent = r.plan !== null ? r.plan : r.no_plan_reason;
    pre.classList.toggle('muted', r.plan === null);
  } catch (e) {
    pre.textContent = `Cannot explain: ${e.message}`;
  }
}

async function cancelQuery() {
  const user = document.getElementById('user').value.trim();
  if (!user) {
    showNotice('Enter your user name under “Acting as” (top right) to cancel the query.',
               'error');
    document.getElementById('user').focus();
    return;
  }
  const button = document.getElementById('cancel');
  button.disabled = true;
  await postCancel(queryId, user);
  button.disabled = false;
  terminal = false;
  await refresh();
}

function init() {
  const user = document.getElementById('user');
  user.value = localStorage.getItem(USER_KEY) || '';
  user.addEventListener('input', () => localStorage.setItem(USER_KEY, user.value.trim()));
  document.getElementById('cancel').addEventListener('click', cancelQuery);
  const q = encodeURIComponent(queryId);
  document.getElementById('json-link').href = `/query_detail?json&query_id=${q}`;
  document.getElementById('plan-link').href = `/query_plan?query_id=${q}`;
  document.title = `Query ${queryId} · coordinatord`;
  refresh();
  loadPlan();
}

document.addEventListener('DOMContentLoaded', init);
