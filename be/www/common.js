// What the debug pages share, loaded before each page's own script: element creation, the
// number and duration formats, the notice line, and cancelling a query. Every server value
// goes through textContent, never HTML.
'use strict';

/// Creates an element; 'text' becomes its textContent.
function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function formatDuration(ms) {
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${String(Math.floor(s % 60)).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} m`;
}

function formatCount(n) {
  return Number(n).toLocaleString('en-US');
}

function showNotice(text, kind) {
  const n = document.getElementById('notice');
  n.textContent = text;
  n.className = `notice ${kind}`;
  n.hidden = false;
}

/// The message of an error answer: its JSON "error" field, else its text.
async function errorText(resp) {
  const body = await resp.text();
  try {
    return JSON.parse(body).error || body;
  } catch (e) {
    return body || `HTTP ${resp.status}`;
  }
}

/// POSTs /cancel_query for query 'id' as 'user' and shows the outcome in the notice line.
async function postCancel(id, user) {
  try {
    const resp = await fetch(`/cancel_query?query_id=${encodeURIComponent(id)}`,
                             {method: 'POST', headers: {'X-Trino-User': user}});
    if (!resp.ok) {
      showNotice(`Cancel failed (${resp.status}): ${await errorText(resp)}`, 'error');
    } else {
      const r = await resp.json();
      showNotice(r.canceled ? `Query ${id} canceled.`
                            : `Query ${id} had already ended (${r.state}).`, 'ok');
    }
  } catch (e) {
    showNotice(`Cancel failed: ${e.message}`, 'error');
  }
}
