// Differential test of request framing: every byte stream of framing-corpus.mjs goes, on a new
// connection whose write side is then shut down, to our Webserver (http-echo-server, named by
// QR_HTTP_ECHO_SERVER) and to a strict reference: Node 20's http.createServer, whose llhttp
// parser is strict by default and which requires Host in HTTP/1.1. Both answer each request
// they accept with the same line ("<method> <target> <hex of body>"), so the two must make
// the same framing decision: the same requests accepted with the same bodies, then either the
// end of the stream or a refusal (a 4xx/5xx answer, then the close).
//
// Where we are deliberately stricter than llhttp (we refuse, it accepts), STRICTER lists the
// cases with the reason; each entry must match at least one case, so the list stays honest.
// MORE_LENIENT lists, with the reason it is safe, the one case we accept and llhttp refuses.

import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import readline from 'node:readline';
import {test} from 'node:test';

import {corpus} from './framing-corpus.mjs';

/// Our deliberate refusals of what llhttp accepts; 'match' gets the case name.
const STRICTER = [
  {
    match: (n) => n === 'issue/te-gzip-chunked' || /^te\/"[^",]+, ?chunked"\//.test(n),
    reason: 'a coding before chunked (gzip, compress, identity): we implement no coding but ' +
            'chunked, so we answer 501 (RFC 9112 6.1) rather than hand handlers a body still ' +
            'encoded; llhttp only looks at the final coding',
  },
  {
    match: (n) => /^te\/"(, chunked|)"\//.test(n),
    reason: 'an empty Transfer-Encoding, or an empty list element before chunked: we accept ' +
            'exactly "chunked"; llhttp ignores an empty value and skips empty elements',
  },
  {
    match: (n) => /^te-twice\//.test(n),
    reason: 'Transfer-Encoding on two field lines: we accept one line holding exactly ' +
            '"chunked"; llhttp reads the lines as one list',
  },
  {
    match: (n) => /(hosts-2|^issue\/two-hosts|^line\/host-twice-other-case)/.test(n),
    reason: 'more than one Host: RFC 9112 3.2 requires 400; llhttp does not look at Host ' +
            '(Node only requires one in HTTP/1.1)',
  },
  {
    match: (n) => /^(issue\/http10-chunked|version\/1\.0\/hosts-[01]\/te)$/.test(n),
    reason: 'Transfer-Encoding in HTTP/1.0: RFC 9112 6.1 says the framing is faulty; llhttp ' +
            'honours chunked in 1.0',
  },
  {
    match: (n) => /^chunk\/extension-empty-(value|name)$/.test(n),
    reason: 'a chunk extension with an empty name or value (";=b", ";a="): not the RFC 9112 ' +
            '7.1.1 grammar, which we apply without exceptions; llhttp lets these through',
  },
];

/// Where we accept what llhttp refuses, with the reason it is safe.
const MORE_LENIENT = [
  {
    match: (n) => /^te\/"chunked\\t"\//.test(n),
    reason: '"chunked" followed by a tab: HTAB is optional whitespace around a field value ' +
            '(RFC 9110 5.5), so every conforming parser reads "chunked"; Beast strips it before ' +
            'we see the value, llhttp refuses a tab after a Transfer-Encoding',
  },
];

/// Starts http-echo-server; resolves with {port, stop()}.
async function startOurs() {
  const binary = process.env.QR_HTTP_ECHO_SERVER;
  if (!binary) throw new Error('QR_HTTP_ECHO_SERVER must name the http-echo-server binary');
  const child = spawn(binary, [], {stdio: ['pipe', 'pipe', 'inherit']});
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('http-echo-server did not start')), 60000);
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`http-echo-server exited early (${code})`));
    });
    readline.createInterface({input: child.stdout}).on('line', (line) => {
      const m = line.match(/listening on http:\/\/[0-9.]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
  });
  return {port, stop: async () => { child.stdin.end(); await exited; }};
}

/// Starts the reference server; resolves with {port, stop()}.
async function startReference() {
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const line = `${req.method} ${req.url} ${Buffer.concat(chunks).toString('hex')}\n`;
      res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(line)});
      res.end(line);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    stop: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

/// Writes 'bytes', shuts the write side down and resolves with all that arrives until the
/// server closes.
function exchange(port, bytes) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    const socket = net.connect({port, host: '127.0.0.1'}, () => socket.end(bytes, 'latin1'));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the server did not close the connection within 10 s'));
    }, 10000);
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', () => {});  // A reset after a refusal: what arrived still counts.
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
  });
}

/// The framing decision in a stream of responses: {accepted: [echo lines], refused: status}.
function decision(stream) {
  const accepted = [];
  let rest = stream;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    const head = end < 0 ? rest : rest.slice(0, end);
    const status = /^HTTP\/1\.[01] (\d{3}) /.exec(head);
    if (end < 0 || !status) return {accepted, refused: `unparsable answer ${JSON.stringify(rest)}`};
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    const bodyEnd = end + 4 + (length ? Number(length[1]) : 0);
    const code = Number(status[1]);
    if (code >= 400) return {accepted, refused: code};
    if (code >= 200) accepted.push(rest.slice(end + 4, bodyEnd));
    rest = rest.slice(bodyEnd);
  }
  return {accepted, refused: null};
}

const show = (d) => `${JSON.stringify(d.accepted)} then ${d.refused ?? 'end'}`;

test('our framing decisions match llhttp, except where listed', async () => {
  const ours = await startOurs();
  const reference = await startReference();
  const used = new Set();
  const failures = [];
  try {
    for (const {name, bytes} of corpus()) {
      const [a, b] = await Promise.all([exchange(ours.port, bytes), exchange(reference.port, bytes)]);
      const got = decision(a);
      const want = decision(b);
      if (typeof got.refused === 'string' || typeof want.refused === 'string') {
        failures.push(`${name}: ours ${show(got)}; llhttp ${show(want)}`);
        continue;
      }
      const same = JSON.stringify(got.accepted) === JSON.stringify(want.accepted) &&
                   (got.refused === null) === (want.refused === null);
      if (same) continue;
      // A listed exception: we refuse the case's request (having accepted nothing llhttp did
      // not), where llhttp accepts it.
      const stricter = got.refused !== null &&
                       want.accepted.slice(0, got.accepted.length).join() === got.accepted.join();
      const list = stricter ? STRICTER : MORE_LENIENT;
      const entry = list.find((e) => e.match(name));
      if (entry) {
        used.add(entry);
        continue;
      }
      failures.push(`${name} ${JSON.stringify(bytes)}: ours ${show(got)}; llhttp ${show(want)}`);
    }
  } finally {
    await ours.stop();
    await reference.stop();
  }
  for (const entry of [...STRICTER, ...MORE_LENIENT]) {
    if (!used.has(entry)) failures.push(`exception matched no case: ${entry.reason}`);
  }
  assert.deepEqual(failures, []);
});
