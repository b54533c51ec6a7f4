// The byte streams of the framing differential test: the cases of issue 15 by name, then a
// generated corpus varying one or two framing dimensions at a time (Transfer-Encoding values,
// case, whitespace and duplicates; Content-Length values and duplicates; HTTP versions; Host
// counts; chunk-size forms; trailers; bare CR and LF). Every stream ends with NEXT, a plain
// request that a server in sync with the client answers after the case's own request: a
// server that took a body for a request answers something else.

export const NEXT = 'GET /next HTTP/1.1\r\nHost: h\r\n\r\n';
/// A complete request of its own, as the body of another: served only if smuggled.
export const SMUGGLED = 'GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n';
const CHUNKED_HELLO = '5\r\nhello\r\n0\r\n\r\n';

/// "POST /case HTTP/<version>" with 'hosts' Host lines, the given header lines and 'body'.
function request({version = '1.1', hosts = 1, headers = [], body = '', method = 'POST'}) {
  let out = `${method} /case HTTP/${version}\r\n`;
  for (let i = 0; i < hosts; ++i) out += `Host: h${i}\r\n`;
  for (const h of headers) out += `${h}\r\n`;
  return `${out}\r\n${body}`;
}

const TE_VALUES = [
  'chunked', 'Chunked', 'CHUNKED', 'chunked ', ' chunked', '\tchunked', 'chunked\t', 'xchunked',
  'chunkedx', 'identity', 'gzip', 'deflate', 'gzip, chunked', 'gzip,chunked', 'compress, chunked',
  'chunked, gzip', 'chunked, identity', 'identity, chunked', 'chunked, chunked', 'chunked,',
  ', chunked', 'chunked;a=b', 'chunked ;a=b', 'gzip;q=1, chunked', '', ',', 'chu nked',
  '"chunked"',
];

const CL_VALUES = [
  '5', '05', '005', '+5', '-5', '5, 5', '5,5', ' 5', '5 ', '5 5', '0x5', '5.0', '', 'abc', '1e1',
  '18446744073709551616',
];

const CHUNK_BODIES = {
  'plain': CHUNKED_HELLO,
  'leading-zero-size': '05\r\nhello\r\n0\r\n\r\n',
  'upper-hex': 'A\r\n0123456789\r\n0\r\n\r\n',
  'lower-hex': 'a\r\n0123456789\r\n0\r\n\r\n',
  'two-chunks': '2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n',
  'extension': '5;ext=1\r\nhello\r\n0\r\n\r\n',
  'quoted-extension': '5;ext="a b"\r\nhello\r\n0\r\n\r\n',
  'empty-extension': '5;\r\nhello\r\n0\r\n\r\n',
  'space-before-crlf': '5 \r\nhello\r\n0\r\n\r\n',
  'tab-before-crlf': '5\t\r\nhello\r\n0\r\n\r\n',
  'space-before-extension': '5 ;a=b\r\nhello\r\n0\r\n\r\n',
  'hex-prefix': '0x5\r\nhello\r\n0\r\n\r\n',
  'plus-sign': '+5\r\nhello\r\n0\r\n\r\n',
  'minus-sign': '-5\r\nhello\r\n0\r\n\r\n',
  'extension-spaces-around-equals': '5;a = b\r\nhello\r\n0\r\n\r\n',
  'extension-empty-value': '5;a=\r\nhello\r\n0\r\n\r\n',
  'extension-empty-name': '5;=b\r\nhello\r\n0\r\n\r\n',
  'extension-two-params': '5;a;b=c\r\nhello\r\n0\r\n\r\n',
  'extension-on-last-chunk': '5\r\nhello\r\n0;a=b\r\n\r\n',
  'overflow-size': 'fffffffffffffffffff\r\nhello\r\n0\r\n\r\n',
  'data-longer-than-size': '5\r\nhelloX\r\n0\r\n\r\n',
  'bare-lf-after-size': '5\nhello\r\n0\r\n\r\n',
  'bare-lf-after-data': '5\r\nhello\n0\r\n\r\n',
  'bare-cr-after-size': '5\rhello\r\n0\r\n\r\n',
  'zero-size-padded': '000\r\n\r\n',
  'bare-lf-last-chunk': '5\r\nhello\r\n0\n\n',
  'trailer-user': '5\r\nhello\r\n0\r\nX-Trino-User: mallory\r\n\r\n',
  'trailer-two-fields': '0\r\nX-A: 1\r\nX-B: 2\r\n\r\n',
  'trailer-content-length': '5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n',
  'trailer-transfer-encoding': '5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n',
  'trailer-host': '0\r\nHost: evil\r\n\r\n',
  'trailer-malformed': '0\r\nBad Trailer\r\n\r\n',
  'trailer-bare-cr': '0\r\nX-A: 1\r2\r\n\r\n',
};

const LINE_VARIANTS = {
  'bare-cr-after-version': 'GET /case HTTP/1.1\rHost: h\r\n\r\n',
  'bare-cr-in-target': 'GET /ca\rse HTTP/1.1\r\nHost: h\r\n\r\n',
  'bare-cr-after-method': 'GET\r /case HTTP/1.1\r\nHost: h\r\n\r\n',
  'bare-cr-in-header-value': 'GET /case HTTP/1.1\r\nHost: h\r\nX-A: 1\r2\r\n\r\n',
  'bare-cr-in-header-name': 'GET /case HTTP/1.1\r\nHost: h\r\nX\r-A: 1\r\n\r\n',
  'bare-cr-ending-headers': 'GET /case HTTP/1.1\r\nHost: h\r\n\r\r\n',
  'bare-lf-everywhere': 'GET /case HTTP/1.1\nHost: h\n\n',
  'bare-lf-after-version': 'GET /case HTTP/1.1\nHost: h\r\n\r\n',
  'bare-lf-after-header': 'GET /case HTTP/1.1\r\nHost: h\nX-A: 1\r\n\r\n',
  'bare-lf-ending-headers': 'GET /case HTTP/1.1\r\nHost: h\r\n\n',
  'obs-fold': 'GET /case HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\n\r\n',
  'obs-fold-te': 'POST /case HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n chunked\r\n\r\n' +
      CHUNKED_HELLO,
  'obs-fold-te-list': 'POST /case HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip,\r\n\tchunked' +
      '\r\n\r\n' + CHUNKED_HELLO,
  'obs-fold-cl': 'POST /case HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n 5\r\n\r\nhello',
  'space-before-first-field': 'GET /case HTTP/1.1\r\n Host: h\r\n\r\n',
  'space-before-colon': 'GET /case HTTP/1.1\r\nHost: h\r\nX-A : 1\r\n\r\n',
  'te-space-before-colon': 'POST /case HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n' +
      '\r\n' + CHUNKED_HELLO,
  'version-1.2': 'GET /case HTTP/1.2\r\nHost: h\r\n\r\n',
  'version-2.0': 'GET /case HTTP/2.0\r\nHost: h\r\n\r\n',
  'version-0.9': 'GET /case HTTP/0.9\r\nHost: h\r\n\r\n',
  'version-1.10': 'GET /case HTTP/1.10\r\nHost: h\r\n\r\n',
  'version-lower-case': 'GET /case http/1.1\r\nHost: h\r\n\r\n',
  'empty-host': 'GET /case HTTP/1.1\r\nHost:\r\n\r\n',
  'host-twice-other-case': 'GET /case HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n',
};

/// [{name, bytes}], every stream ending with NEXT.
export function corpus() {
  const cases = [];
  const add = (name, bytes) => cases.push({name, bytes: bytes + NEXT});
  // Issue 15, by name.
  add('issue/te-xchunked', request({headers: ['Transfer-Encoding: xchunked'], body: SMUGGLED}));
  add('issue/te-chunked-identity',
      request({headers: ['Transfer-Encoding: chunked, identity'], body: SMUGGLED}));
  add('issue/te-identity', request({headers: ['Transfer-Encoding: identity'], body: SMUGGLED}));
  add('issue/te-gzip-chunked',
      request({headers: ['Transfer-Encoding: gzip, chunked'], body: CHUNKED_HELLO}));
  add('issue/te-with-cl', request({headers: ['Transfer-Encoding: chunked', 'Content-Length: 5'],
                                   body: CHUNKED_HELLO}));
  add('issue/te-identity-with-cl',
      request({headers: ['Transfer-Encoding: identity', 'Content-Length: 5'], body: 'hello'}));
  add('issue/http10-chunked', request({version: '1.0', hosts: 1, body: CHUNKED_HELLO,
                                       headers: ['Connection: keep-alive',
                                                 'Transfer-Encoding: chunked']}));
  add('issue/trailer-user', request({headers: ['Transfer-Encoding: chunked'],
                                     body: CHUNK_BODIES['trailer-user']}));
  add('issue/no-host', request({hosts: 0, method: 'GET'}));
  add('issue/two-hosts', request({hosts: 2, method: 'GET'}));
  add('issue/bare-cr', LINE_VARIANTS['bare-cr-after-version']);
  // Transfer-Encoding values (with a chunked body, and with a request as the body).
  for (const te of TE_VALUES) {
    add(`te/${JSON.stringify(te)}/chunked-body`,
        request({headers: [`Transfer-Encoding: ${te}`], body: CHUNKED_HELLO}));
    add(`te/${JSON.stringify(te)}/request-body`,
        request({headers: [`Transfer-Encoding: ${te}`], body: SMUGGLED}));
  }
  for (const name of ['transfer-encoding', 'TRANSFER-ENCODING', 'Transfer-encoding']) {
    add(`te-name/${name}`, request({headers: [`${name}: chunked`], body: CHUNKED_HELLO}));
  }
  for (const first of ['chunked', 'gzip', 'identity']) {
    for (const second of ['chunked', 'gzip', 'identity']) {
      add(`te-twice/${first}+${second}`,
          request({headers: [`Transfer-Encoding: ${first}`, `Transfer-Encoding: ${second}`],
                   body: CHUNKED_HELLO}));
    }
  }
  // Content-Length values, one and two lines.
  for (const cl of CL_VALUES) {
    add(`cl/${JSON.stringify(cl)}`, request({headers: [`Content-Length: ${cl}`], body: 'hello'}));
  }
  for (const [a, b] of [['5', '5'], ['5', '6'], ['5', '05'], ['0', '5']]) {
    add(`cl-twice/${a}+${b}`,
        request({headers: [`Content-Length: ${a}`, `Content-Length: ${b}`], body: 'hello'}));
  }
  // Transfer-Encoding with Content-Length, in both orders.
  for (const te of ['chunked', 'gzip', 'identity', 'gzip, chunked']) {
    for (const cl of ['5', '0', '20']) {
      const t = `Transfer-Encoding: ${te}`;
      const c = `Content-Length: ${cl}`;
      add(`te-cl/${te}/${cl}`, request({headers: [t, c], body: CHUNKED_HELLO}));
      add(`cl-te/${cl}/${te}`, request({headers: [c, t], body: CHUNKED_HELLO}));
    }
  }
  // Versions, Host counts and framings.
  for (const version of ['1.0', '1.1']) {
    for (const hosts of [0, 1, 2]) {
      // Kept alive in 1.0 too, so that NEXT shows whether the server stayed in sync.
      const alive = version === '1.0' ? ['Connection: keep-alive'] : [];
      add(`version/${version}/hosts-${hosts}/none`,
          request({version, hosts, headers: alive, method: 'GET'}));
      add(`version/${version}/hosts-${hosts}/cl`,
          request({version, hosts, headers: [...alive, 'Content-Length: 5'], body: 'hello'}));
      add(`version/${version}/hosts-${hosts}/te`,
          request({version, hosts, headers: [...alive, 'Transfer-Encoding: chunked'],
                   body: CHUNKED_HELLO}));
    }
  }
  // Chunk-size forms and trailers.
  for (const [name, body] of Object.entries(CHUNK_BODIES)) {
    add(`chunk/${name}`, request({headers: ['Transfer-Encoding: chunked'], body}));
  }
  // Bare CR and LF, versions, header syntax.
  for (const [name, bytes] of Object.entries(LINE_VARIANTS)) add(`line/${name}`, bytes);
  return cases;
}
