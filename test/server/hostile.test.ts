import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { get } from 'node:http';
import { Agent } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createHandlers } from '../../src/admission/handlers.js';
import { createCA, issueClientCert } from '../../src/certs/pki.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { createAdmissionApp } from '../../src/server/admission-app.js';
import { createAdmissionServer } from '../../src/server/admission-server.js';
import { EdgeLimits } from '../../src/server/edge.js';
import { HealthLimits } from '../../src/server/health.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { admit } from '../helpers/apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { errorCode } from '../helpers/client-go.js';
import { exchange, openTcp, openTls, rawPost, responseJson } from '../helpers/raw.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { makeTestCerts } from '../helpers/tls.js';

// One second for the whole request, so the handshake, header and body timeouts fire in 1-2 s.
const FLAGS = ['--request-timeout', '1', '--body-timeout', '1', '--max-inflight', '3'];

let server: TestServer;
let port: number;
let ca: string;

before(async () => {
  server = await startTestServer(FLAGS);
  port = server.running.port;
  ca = server.certs.ca.certPem;
});
after(() => server.close());

/** The proof that a hostile input left the server serving: a real review, applied the apiserver's way. */
async function validReviewSucceeds(url = server.url, caPem = ca): Promise<void> {
  const { response, ops } = await admit(url, caPem, optedInPod());
  assert.equal(response.allowed, true);
  assert.ok(ops.length > 0, 'the sidecars were injected');
}

async function post(path: string, body: string): Promise<{ status: number; body: any }> {
  const res = await httpsRequest(`${server.url}${path}`, body, { ca });
  return { status: res.status, body: res.json() };
}

function httpGet(url: string): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
    }).on('error', reject);
  });
}

describe('hostile review bodies', () => {
  it('answers 400 BODY_MALFORMED for malformed JSON', async () => {
    const res = await post('/mutate', '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {');
    assert.equal(res.status, 400);
    assert.equal(errorCode(res.body), 'BODY_MALFORMED');
    await validReviewSucceeds();
  });

  for (const [name, body] of [
    ['a JSON array', '[1,2,3]'],
    ['a JSON string', '"AdmissionReview"'],
    ['a Pod instead of a review', JSON.stringify(optedInPod())],
    ['an unknown review version', JSON.stringify({ ...podReview(optedInPod()), apiVersion: 'admission.k8s.io/v2' })],
  ] as const) {
    it(`answers 400 REVIEW_INVALID for JSON that is not an AdmissionReview: ${name}`, async () => {
      const res = await post('/mutate', body);
      assert.equal(res.status, 400);
      assert.equal(errorCode(res.body), 'REVIEW_INVALID');
      await validReviewSucceeds();
    });
  }

  for (const [name, request] of [
    ['request missing', undefined],
    ['request null', null],
    ['uid missing', { operation: 'CREATE', object: optedInPod() }],
    ['uid empty', { uid: '', operation: 'CREATE', object: optedInPod() }],
    ['uid a number', { uid: 42, operation: 'CREATE', object: optedInPod() }],
  ] as const) {
    it(`answers 400 REVIEW_INVALID when ${name}, since there is no uid to answer`, async () => {
      const res = await post('/mutate', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request }));
      assert.equal(res.status, 400);
      assert.equal(errorCode(res.body), 'REVIEW_INVALID');
      await validReviewSucceeds();
    });
  }

  for (const [name, object] of [
    ['object missing', undefined],
    ['object null', null],
    ['object an array', [optedInPod()]],
    ['object of another kind', { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', labels: { 'sidecar-injector.io/inject': 'true' } }, spec: {} }],
    ['object of another version', { ...optedInPod(), apiVersion: 'v2' }],
    ['containers not a list', { ...optedInPod(), spec: { containers: { web: { image: 'nginx' } } } }],
    ['a container without a name', { ...optedInPod(), spec: { containers: [{ image: 'nginx' }] } }],
    ['labels not strings', { ...optedInPod(), metadata: { labels: { 'sidecar-injector.io/inject': true } } }],
    ['an ownerReference that is not an object', { ...optedInPod(), metadata: { ...optedInPod().metadata, ownerReferences: [null] } }],
    ['an imagePullSecret that is not an object', { ...optedInPod(), spec: { ...optedInPod().spec, imagePullSecrets: [null] } }],
  ] as const) {
    for (const endpoint of ['/mutate', '/validate']) {
      it(`refuses a pod CREATE with ${name} on ${endpoint}: allowed false, 400, its uid`, async () => {
        const uid = randomUUID();
        const res = await post(endpoint, JSON.stringify(podReview(object as object, { uid })));
        assert.equal(res.status, 200);
        assert.equal(res.body.response.uid, uid);
        assert.equal(res.body.response.allowed, false);
        assert.equal(res.body.response.status.code, 400);
        assert.match(res.body.response.status.message, /not a valid AdmissionReview: request\.object/);
        assert.equal(res.body.response.patch, undefined);
        await validReviewSucceeds();
      });
    }
  }

  for (const operation of ['UPDATE', 'DELETE', 'CONNECT']) {
    it(`allows a pod ${operation} untouched, echoing its uid`, async () => {
      const uid = randomUUID();
      const base = podReview(optedInPod(), { uid, operation });
      if (operation === 'DELETE') base.request = { ...base.request, object: null, oldObject: optedInPod() };
      const res = await post('/mutate', JSON.stringify(base));
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.response.uid, uid);
      assert.equal(res.body.response.allowed, true);
      assert.equal(res.body.response.patch, undefined);
      await validReviewSucceeds();
    });
  }

  for (const [subResource, kind] of [
    ['binding', 'Binding'],
    ['ephemeralcontainers', 'Pod'],
    ['status', 'Pod'],
  ] as const) {
    it(`allows a request on the pods/${subResource} subresource untouched`, async () => {
      const uid = randomUUID();
      const base = podReview(optedInPod(), { uid });
      base.request = { ...base.request, subResource, kind: { group: '', version: 'v1', kind } };
      const res = await post('/mutate', JSON.stringify(base));
      assert.equal(res.status, 200);
      assert.equal(res.body.response.uid, uid);
      assert.equal(res.body.response.allowed, true);
      assert.equal(res.body.response.patch, undefined);
      await validReviewSucceeds();
    });
  }

  it('answers 400 for a review nested 100 000 levels deep, without overflowing the stack', async () => {
    const depth = 100_000;
    const res = await post('/mutate', '['.repeat(depth) + ']'.repeat(depth));
    assert.equal(res.status, 400);
    assert.equal(errorCode(res.body), 'REVIEW_INVALID');
    await validReviewSucceeds();
  });

  it('refuses a pod that carries a value nested 100 000 levels deep in a field the injector never reads (400, before parsing)', async () => {
    // JSON.stringify cannot write this depth (it recurses), so the body is spliced as text.
    const depth = 100_000;
    const marker = '"__DEEP__"';
    const text = JSON.stringify(podReview(optedInPod({ spec: { containers: [{ name: 'web', image: 'nginx', securityContext: '__DEEP__' }] } })));
    const deep = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    const started = Date.now();
    const res = await post('/mutate', text.replace(marker, deep));
    assert.equal(res.status, 400);
    assert.equal(errorCode(res.body), 'REVIEW_INVALID');
    assert.match(res.body.message, /nested more than 64 levels/);
    assert.ok(Date.now() - started < 5000, 'refused without parsing the depth');
    await validReviewSucceeds();
  });

  it('never opts in a pod whose __proto__ label key holds the opt-in, and pollutes no prototype', async () => {
    const uid = randomUUID();
    // Text, since an object literal's __proto__ would set the prototype instead of making a key.
    const labels = '{"__proto__":{"sidecar-injector.io/inject":"true","polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}}}';
    const text = JSON.stringify(podReview(optedInPod({ labels: { MARK: 'x' } }), { uid })).replace(/"labels":\{[^}]*\}/, `"labels":${labels}`);
    const res = await post('/mutate', text);
    assert.equal(res.status, 200);
    assert.equal(res.body.response.uid, uid);
    // Not opted in (no own inject label), so the injector does not act on it: allowed, untouched,
    // and the apiserver's own validation refuses the labels.
    assert.equal(res.body.response.allowed, true);
    assert.equal(res.body.response.patch, undefined, 'a __proto__ key never opts a pod in');
    assert.equal(({} as any)['sidecar-injector.io/inject'], undefined);
    assert.equal(({} as any).polluted, undefined);
    await validReviewSucceeds();
  });

  it('injects a pod whose annotations hold __proto__ and constructor keys, adding only its own', async () => {
    const uid = randomUUID();
    const text = JSON.stringify(podReview(optedInPod({ annotations: { PROTO: 'x', constructor: 'y' } }), { uid })).replace('"PROTO"', '"__proto__"');
    const res = await post('/mutate', text);
    assert.equal(res.status, 200);
    assert.equal(res.body.response.allowed, true);
    const ops = decodePatch(res.body.response);
    assert.ok(ops.some((op: any) => op.path === '/metadata/annotations/sidecar-injector.io~1status'));
    assert.ok(
      ops.every((op: any) => !/__proto__|constructor/.test(op.path)),
      JSON.stringify(ops),
    );
    assert.equal(({} as any).x, undefined);
    await validReviewSucceeds();
  });

  it('refuses template names such as __proto__ and constructor as unknown templates', async () => {
    const uid = randomUUID();
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': '__proto__,constructor,toString' } });
    const res = await post('/mutate', JSON.stringify(podReview(pod, { uid })));
    assert.equal(res.status, 200);
    assert.equal(res.body.response.uid, uid);
    assert.equal(res.body.response.allowed, false);
    assert.equal(res.body.response.status.code, 400);
    assert.match(res.body.response.status.message, /unknown sidecar template\(s\) "__proto__", "constructor", "toString"/);
    await validReviewSucceeds();
  });

  it('keeps a denial to one short line when the pod names 20 000 unknown templates', async () => {
    const names = Array.from({ length: 20_000 }, (_, i) => `t${i}`).join(',');
    const res = await post('/mutate', JSON.stringify(podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': names } }))));
    assert.equal(res.status, 200);
    assert.equal(res.body.response.allowed, false);
    const message: string = res.body.response.status.message;
    assert.ok(message.length < 600, `${message.length} characters`);
    assert.match(message, /"t4" and 19995 more named in annotation/);
    await validReviewSucceeds();
  });

  it('never round-trips integers beyond 2^53 through the patch', async () => {
    const big = '9007199254740993'; // 2^53 + 1: JSON.parse reads it as ...992
    const marker = 424242;
    const pod = optedInPod({ spec: { containers: [{ name: 'web', image: 'nginx', securityContext: { runAsUser: marker } }], priority: marker } });
    const text = JSON.stringify(podReview(pod)).replaceAll(String(marker), big);
    const res = await post('/mutate', text);
    assert.equal(res.status, 200);
    assert.equal(res.body.response.allowed, true);
    const patchText = Buffer.from(res.body.response.patch, 'base64').toString('utf8');
    assert.ok(!patchText.includes('900719925474099'), "the pod's own int64 values stay out of the patch");
    const ops = JSON.parse(patchText);
    assert.ok(
      ops.some((op: any) => op.path.startsWith('/spec/containers/0/')),
      'the app container was extended in place',
    );
    await validReviewSucceeds();
  });
});

describe('hostile connections', () => {
  it('answers 408 and closes a request whose body never ends', async () => {
    const socket = await openTls(port, ca);
    const body = JSON.stringify(podReview(optedInPod()));
    const r = await exchange(socket, [rawPost('/mutate', body).slice(0, -body.length + 10)], 6000);
    assert.equal(r.status, 408, r.text);
    assert.ok(r.closed);
    assert.ok(r.ms < 4000, `closed after ${r.ms} ms`);
    await validReviewSucceeds();
  });

  it('answers 408 and closes a request whose headers never end', async () => {
    const socket = await openTls(port, ca);
    const r = await exchange(socket, ['POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n'], 6000);
    assert.equal(r.status, 408, r.text);
    assert.ok(r.closed);
    assert.ok(r.ms < 4000, `closed after ${r.ms} ms`);
    await validReviewSucceeds();
  });

  it('delivers the 413 for a body over the limit while the client is still sending it', async () => {
    const big = rawPost('/mutate', ' '.repeat(8 * 1024 * 1024));
    for (let i = 0; i < 3; i++) {
      const r = await exchange(await openTls(port, ca), [big], 1500);
      assert.equal(r.status, 413, `attempt ${i}: ${r.error ?? r.text.slice(0, 80)}`);
    }
    await validReviewSucceeds();
  });

  it('answers 431 to headers beyond the limit', async () => {
    const socket = await openTls(port, ca);
    const r = await exchange(socket, [rawPost('/mutate', '{}', { 'X-Padding': 'a'.repeat(EdgeLimits.maxHeaderSize + 1) })], 4000);
    assert.equal(r.status, 431, r.text);
    assert.ok(r.closed);
    await validReviewSucceeds();
  });

  it('closes a TCP connection that never starts the TLS handshake', async () => {
    const socket = await openTcp(port);
    const r = await exchange(socket, [], 6000);
    assert.ok(r.closed, 'the server closed the stalled handshake');
    assert.ok(r.ms < 4000, `closed after ${r.ms} ms`);
    assert.equal(r.text, '');
    await validReviewSucceeds();
  });

  it('closes a connection that stalls halfway through the TLS handshake', async () => {
    const socket = await openTcp(port);
    // The first bytes of a TLS 1.2 ClientHello record, then nothing.
    const r = await exchange(socket, [Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03])], 6000);
    assert.ok(r.closed);
    assert.ok(r.ms < 4000, `closed after ${r.ms} ms`);
    await validReviewSucceeds();
  });

  it('closes a connection that sends garbage instead of a TLS handshake', async () => {
    // Some random bytes read as the header of a record longer than what was sent: a TLS record when
    // the second byte is 3 (1 time in about 270), an SSLv2 ClientHello when the first has its high
    // bit set and the third is 1 (1 in 512). OpenSSL then waits for the rest, and only the handshake
    // timeout closes the connection: the stalled case above. So the garbage never begins that way.
    const garbage = randomBytes(4096);
    garbage.writeUInt8(garbage.readUInt8(0) & 0x7f, 0);
    garbage[1] = 0x00;
    const socket = await openTcp(port);
    const r = await exchange(socket, [garbage], 4000);
    assert.ok(r.closed);
    assert.ok(r.ms < 1000, `closed after ${r.ms} ms`);
    await validReviewSucceeds();
  });

  it('closes a plain-HTTP request on the TLS port without answering in clear text', async () => {
    const socket = await openTcp(port);
    const r = await exchange(socket, [rawPost('/mutate', JSON.stringify(podReview(optedInPod())))], 4000);
    assert.ok(r.closed);
    assert.ok(r.ms < 1000, `closed after ${r.ms} ms`);
    assert.ok(!r.text.startsWith('HTTP/'), 'no clear-text HTTP answer');
    await validReviewSucceeds();
  });

  it('serves an HTTP/1.0 review and closes the connection after it', async () => {
    const uid = randomUUID();
    const socket = await openTls(port, ca);
    const r = await exchange(socket, [rawPost('/mutate', JSON.stringify(podReview(optedInPod(), { uid })), {}, 'HTTP/1.0')], 4000);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.closed, 'HTTP/1.0 without keep-alive closes');
    assert.equal(responseJson(r.text).response.uid, uid);
    await validReviewSucceeds();
  });

  const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n';
  for (const [name, bytes] of [
    [
      'Content-Length with Transfer-Encoding',
      `POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
    ],
    [
      'two different Content-Lengths',
      `POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: ${2 + smuggled.length}\r\n\r\n{}${smuggled}`,
    ],
    [
      'an obfuscated Transfer-Encoding',
      `POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked, identity\r\n\r\n2\r\n{}\r\n0\r\n\r\n${smuggled}`,
    ],
    [
      'a Transfer-Encoding folded over two lines',
      `POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding:\r\n chunked\r\nContent-Length: 2\r\n\r\n{}${smuggled}`,
    ],
    ['a bare LF line ending', `POST /mutate HTTP/1.1\nHost: localhost\nContent-Length: 2\n\n{}${smuggled}`],
  ] as const) {
    it(`answers 400 once and closes on a smuggling attempt: ${name}`, async () => {
      const socket = await openTls(port, ca);
      const r = await exchange(socket, [bytes], 4000);
      assert.equal(r.status, 400, r.text);
      assert.ok(r.closed);
      assert.equal(r.text.match(/HTTP\/1\.1 /g)?.length, 1, `one answer only, the smuggled request is never served: ${r.text}`);
      await validReviewSucceeds();
    });
  }
});

describe('bodies cut small (issue 20)', () => {
  /** Headers of a chunked POST: what the apiserver never sends (it always sends Content-Length). */
  const chunkedHead = (path: string): string =>
    `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;

  /** Sends `head`, then `piece()` one write a tick (each its own TLS record) until the server answers or closes, or `max` pieces. */
  async function dribble(
    socket: import('node:tls').TLSSocket,
    head: string,
    piece: (i: number) => string,
    max: number,
  ): Promise<{ text: string; closed: boolean; pieces: number }> {
    let text = '';
    let closed = false;
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('error', () => {});
    socket.once('close', () => (closed = true));
    socket.write(head);
    let pieces = 0;
    for (; pieces < max && !closed && text === ''; pieces++) {
      socket.write(piece(pieces));
      await new Promise((r) => setImmediate(r));
    }
    const until = Date.now() + 2000;
    while (!closed && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    socket.destroy();
    return { text, closed, pieces };
  }

  it('refuses a chunked body with 411 before reading it, and closes its connection', async () => {
    const r = await dribble(await openTls(port, ca), chunkedHead('/mutate'), () => '1\r\n{\r\n', 1000);
    assert.match(r.text, /^HTTP\/1\.1 411 /, r.text.slice(0, 200));
    assert.equal(errorCode(responseJson(r.text)), 'LENGTH_REQUIRED');
    assert.match(r.text, /connection: close/i);
    assert.ok(r.closed);
    await validReviewSucceeds();
  });

  it('closes the connection of a chunked body sent to a path that does not exist, reading no more of it (Node closes it too without the edge)', async () => {
    const r = await dribble(await openTls(port, ca), chunkedHead('/nope'), () => '1\r\nx\r\n', 1000);
    assert.match(r.text, /^HTTP\/1\.1 404 /, r.text.slice(0, 200));
    assert.match(r.text, /connection: close/i, 'the unread body goes with its connection');
    assert.ok(r.closed);
    await validReviewSucceeds();
  });

  it('counts each piece of a body sent one byte a TLS record against --bodies-in-transit-mb, so it cannot take more memory than that', async () => {
    // 100 KB fit 1 MiB; one byte a record, each byte a chunk of its own, they would take ~40 MB.
    const s = await startTestServer(['--bodies-in-transit-mb', '1']);
    try {
      const length = 100_000;
      const head = `POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
      const r = await dribble(await openTls(s.running.port, s.certs.ca.certPem), head, () => ' ', length);
      assert.match(r.text, /^HTTP\/1\.1 429 /, r.text.slice(0, 200));
      assert.equal(errorCode(responseJson(r.text)), 'OVERLOADED');
      assert.ok(r.pieces < 5000, `refused after ${r.pieces} bytes`);
      await validReviewSucceeds(s.url, s.certs.ca.certPem);
    } finally {
      await s.close();
    }
  });
});

describe('slow bodies', () => {
  const stall = (body: string): string => rawPost('/mutate', body).slice(0, -(body.length - 1)); // headers and one byte

  it('serves valid reviews promptly while 40 clients hold stalled bodies, and drops those with a 408 after --body-timeout', async () => {
    const s = await startTestServer(['--body-timeout', '2']); // --max-inflight 32: fewer slots than stalled clients
    const caPem = s.certs.ca.certPem;
    try {
      const body = JSON.stringify(podReview(optedInPod()));
      const sockets = await Promise.all(Array.from({ length: 40 }, () => openTls(s.running.port, caPem)));
      const stalled = sockets.map((socket) => exchange(socket, [stall(body)], 8000));
      await new Promise((r) => setTimeout(r, 100));
      for (let i = 0; i < 5; i++) {
        const started = Date.now();
        await validReviewSucceeds(s.url, caPem);
        assert.ok(Date.now() - started < 1500, `review ${i} took ${Date.now() - started} ms`);
      }
      for (const r of await Promise.all(stalled)) {
        assert.equal(r.status, 408, r.text);
        assert.equal(errorCode(responseJson(r.text)), 'BODY_TIMEOUT');
        assert.ok(r.closed, 'the connection is dropped');
        assert.ok(r.ms < 5000, `dropped after ${r.ms} ms`);
      }
      await validReviewSucceeds(s.url, caPem);
    } finally {
      await s.close();
    }
  });

  it('refuses a body that does not fit --bodies-in-transit-mb with a 429 and a closed connection, and takes it once the stalled bytes are gone', async () => {
    const s = await startTestServer(['--bodies-in-transit-mb', '1', '--body-timeout', '1']);
    const caPem = s.certs.ca.certPem;
    try {
      // 900 KB of a 1 MB body, then nothing: the bytes it sent stay in transit until --body-timeout.
      const hog = await openTls(s.running.port, caPem);
      const hogBody = ' '.repeat(1_000_000);
      const hogged = exchange(hog, [rawPost('/mutate', hogBody).slice(0, -100_000)], 6000);
      await new Promise((r) => setTimeout(r, 200));
      // 200 KB: under Kubernetes' 256 KiB of annotations, over the 148 KB the stalled body left.
      const big = JSON.stringify(podReview(optedInPod({ annotations: { note: 'n'.repeat(200_000) } })));
      const refused = await exchange(await openTls(s.running.port, caPem), [rawPost('/mutate', big)], 4000);
      assert.equal(refused.status, 429, refused.text.slice(0, 200));
      assert.equal(errorCode(responseJson(refused.text)), 'OVERLOADED');
      assert.match(refused.text, /connection: close/i);
      await validReviewSucceeds(s.url, caPem); // a small body still fits
      assert.equal((await hogged).status, 408);
      const res = await httpsRequest(`${s.url}/mutate`, big, { ca: caPem });
      assert.equal(res.status, 200);
      assert.equal(res.json().response.allowed, true);
    } finally {
      await s.close();
    }
  });
});

describe('edge limits', () => {
  it("sets every timeout and limit on purpose, with keep-alive longer than the apiserver's 90 s", async () => {
    const s = await startTestServer();
    try {
      const a = s.running.admission;
      assert.ok(a.keepAliveTimeout > 90_000);
      assert.equal(a.headersTimeout, 5_000);
      assert.equal(a.requestTimeout, 10_000);
      assert.equal(a.timeout, EdgeLimits.idleSocketSeconds * 1000);
      assert.equal(a.maxRequestsPerSocket, EdgeLimits.maxRequestsPerSocket);
      assert.equal(a.maxHeadersCount, EdgeLimits.maxHeadersCount);
    } finally {
      await s.close();
    }
  });

  it('gives the health port a headers timeout, a request timeout, a short keep-alive and an idle timeout (its connection bound: connections.test.ts)', async () => {
    const h = server.running.health;
    assert.equal(h.headersTimeout, 1_000, 'min(2 s, --request-timeout)');
    assert.equal(h.requestTimeout, 1_000);
    assert.equal(h.keepAliveTimeout, 2_000);
    assert.equal(h.timeout, HealthLimits.idleSocketSeconds * 1000);
    assert.equal(h.maxHeadersCount, HealthLimits.maxHeadersCount);
  });

  it('answers 408 and closes a health request whose headers never end', async () => {
    const r = await exchange(await openTcp(server.running.healthPort), ['GET /metrics HTTP/1.1\r\nHost: localhost\r\n'], 6000);
    assert.equal(r.status, 408, r.text);
    assert.ok(r.closed);
    assert.ok(r.ms < 4000, `closed after ${r.ms} ms`);
    assert.equal((await httpGet(`${server.healthUrl}/healthz`)).status, 200);
  });

  it('refuses TLS below 1.2 and ciphers without forward secrecy', async () => {
    await assert.rejects(openTls(port, ca, { maxVersion: 'TLSv1.1', minVersion: 'TLSv1' }));
    await assert.rejects(openTls(port, ca, { maxVersion: 'TLSv1.2', ciphers: 'AES128-GCM-SHA256' }));
    (await openTls(port, ca, { maxVersion: 'TLSv1.2' })).destroy();
    await validReviewSucceeds();
  });
});

describe('mutual TLS (--client-ca)', () => {
  let mtls: TestServer;
  let clientCa: Awaited<ReturnType<typeof createCA>>;
  before(async () => {
    clientCa = await createCA('apiserver-client-ca', 1);
    const certs = await makeTestCerts();
    const file = join(certs.certDir, 'client-ca.crt');
    await writeFile(file, clientCa.certPem);
    mtls = await startTestServer(['--client-ca', file]);
  });
  after(() => mtls.close());

  async function reviewWith(agent: Agent): Promise<number> {
    const res = await httpsRequest(`${mtls.url}/mutate`, JSON.stringify(podReview(optedInPod())), { ca: mtls.certs.ca.certPem, agent });
    return res.status;
  }

  it('serves a client whose certificate the client CA issued', async () => {
    const cert = await issueClientCert(clientCa, 'kube-apiserver');
    assert.equal(await reviewWith(new Agent({ cert: cert.certPem, key: cert.keyPem, keepAlive: false })), 200);
  });

  it('refuses a client without a certificate, and one with a certificate from another CA', async () => {
    await assert.rejects(reviewWith(new Agent({ keepAlive: false })), /certificate|ECONNRESET|alert|socket hang up/i);
    const stranger = await issueClientCert(await createCA('other-ca', 1), 'kube-apiserver');
    await assert.rejects(
      reviewWith(new Agent({ cert: stranger.certPem, key: stranger.keyPem, keepAlive: false })),
      /certificate|ECONNRESET|alert|socket hang up/i,
    );
    const cert = await issueClientCert(clientCa, 'kube-apiserver');
    assert.equal(await reviewWith(new Agent({ cert: cert.certPem, key: cert.keyPem, keepAlive: false })), 200);
  });

  it('swaps in a rotated client CA without a restart, and keeps the current one when the file is not a CA', async () => {
    const certs = await makeTestCerts();
    const file = join(certs.certDir, 'client-ca.crt');
    const [oldCa, newCa] = [await createCA('client-ca-1', 1), await createCA('client-ca-2', 1)];
    await writeFile(file, oldCa.certPem);
    const server = await startTestServer(['--client-ca', file, '--cert-check-interval', '1']);
    const status = async (ca: typeof oldCa): Promise<number | string> => {
      const cert = await issueClientCert(ca, 'kube-apiserver');
      const agent = new Agent({ cert: cert.certPem, key: cert.keyPem, keepAlive: false });
      return httpsRequest(`${server.url}/mutate`, JSON.stringify(podReview(optedInPod())), { ca: server.certs.ca.certPem, agent }).then(
        (r) => r.status,
        (err: Error) => err.message,
      );
    };
    const until = async (ca: typeof oldCa): Promise<void> => {
      for (const deadline = Date.now() + 10_000; (await status(ca)) !== 200; await new Promise((r) => setTimeout(r, 100))) {
        assert.ok(Date.now() < deadline, 'the rotated client CA was not served within 10 s');
      }
    };
    try {
      assert.equal(await status(oldCa), 200);
      assert.notEqual(await status(newCa), 200);
      await writeFile(file, newCa.certPem);
      await until(newCa);
      assert.notEqual(await status(oldCa), 200, 'a client of the old CA is refused once the new one is served');
      await writeFile(file, 'not a certificate');
      await new Promise((r) => setTimeout(r, 2500)); // two checks
      assert.equal(await status(newCa), 200, 'a broken file keeps the current client CA');
    } finally {
      await server.close();
    }
  });

  it('refuses to start when the client CA file holds no certificate', async () => {
    const certs = await makeTestCerts();
    const file = join(certs.certDir, 'not-a-ca.crt');
    await writeFile(file, 'hello');
    await assert.rejects(startTestServer(['--client-ca', file]), /client CA .*not-a-ca\.crt/);
  });
});

describe('faults inside a review', () => {
  it("answers HTTP 500 with a Status that carries the fault's message when the handler fails, so failurePolicy decides; the next review succeeds", async () => {
    const certs = await makeTestCerts();
    const set = await loadTemplateSet('templates');
    // The store fails until the first review has been answered (the pipeline reads it for the
    // answer cache's generation, and the handler reads it again).
    let failing = true;
    const app = createAdmissionApp({
      handlers: createHandlers({
        templates: () => {
          if (failing) throw new Error('template store unavailable');
          return set;
        },
      }),
    });
    const faulty = createAdmissionServer(app, certs.serving);
    await new Promise<void>((r) => faulty.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(faulty.address() as AddressInfo).port}`;
    try {
      const uid = randomUUID();
      const res = await httpsRequest(`${url}/mutate`, JSON.stringify(podReview(optedInPod(), { uid })), { ca: certs.ca.certPem });
      assert.equal(res.status, 500);
      // A Status, not an AdmissionReview: client-go reads only a Status from a non-2xx answer, so
      // this is what the user sees; nothing of a patch is in it.
      assert.deepEqual([res.json().kind, res.json().reason, errorCode(res.json()), res.json().response], ['Status', 'InternalError', 'INTERNAL', undefined]);
      assert.match(res.json().message, /template store unavailable/);
      failing = false;
      await validReviewSucceeds(url, certs.ca.certPem);
    } finally {
      faulty.closeAllConnections();
      await new Promise((r) => faulty.close(r));
    }
  });

  it('loads the edge limits from flags', () => {
    const config = serveConfig(
      ['--request-timeout', '3', '--max-connections', '7', '--max-inflight', '2', '--body-timeout', '1', '--bodies-in-transit-mb', '8'],
      {},
    );
    assert.deepEqual(
      [config.requestTimeout, config.maxConnections, config.maxInflight, config.clientCa, config.bodyTimeout, config.bodiesInTransitMb],
      [3, 7, 2, '', 1, 8],
    );
    assert.deepEqual([serveConfig([], {}).bodyTimeout, serveConfig([], {}).bodiesInTransitMb], [2, 32]);
    assert.throws(() => serveConfig(['--request-timeout', '0'], {}), /--request-timeout/);
    assert.throws(() => serveConfig(['--body-timeout', '0'], {}), /--body-timeout/);
    assert.throws(() => serveConfig(['--bodies-in-transit-mb', '0'], {}), /--bodies-in-transit-mb/);
  });
});
