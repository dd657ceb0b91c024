import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { createHandlers } from '../../src/admission/handlers.js';
import { createAdmissionApp } from '../../src/server/admission-app.js';
import { createAdmissionServer } from '../../src/server/admission-server.js';
import { createHealthServer, HealthLimits } from '../../src/server/health.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { admit } from '../helpers/apiserver.js';
import { exchange, openTcp, openTls, rawPost } from '../helpers/raw.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { makeTestCerts } from '../helpers/tls.js';

// The three ways issue 20 broke the transport from any pod that reaches the injector, scaled down
// (a small --max-connections) so that they run in seconds, on real sockets and real TLS.

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function listening<S extends Server | HttpsServer>(server: S): Promise<{ server: S; port: number; [Symbol.asyncDispose](): Promise<void> }> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** Whether the server closes `socket` within `ms`. */
function closedWithin(socket: Socket, ms: number): Promise<boolean> {
  if (socket.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** One GET on a connection, left open after its answer (HTTP/1.1 keep-alive). */
async function getOn(socket: Socket, path: string): Promise<number> {
  const status = new Promise<number>((resolve) => socket.once('data', (d: Buffer) => resolve(Number(d.toString('latin1', 9, 12)))));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  return status;
}

/** A kubelet-style probe: a new connection, one GET, a 1 s timeout. */
async function probe(port: number): Promise<number | string> {
  const socket = await openTcp(port);
  const r = await exchange(socket, ['GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'], 1000);
  return r.status ?? `no answer: ${r.error ?? (r.closed ? 'closed' : 'timeout')}`;
}

describe('the health port under idle connections', () => {
  it(`answers probes while ${HealthLimits.maxConnections} idle keep-alive connections, each after one GET, hold every slot`, async (t) => {
    await using h = await listening(createHealthServer({ isReady: () => true }));
    const idle = await Promise.all(Array.from({ length: HealthLimits.maxConnections }, () => openTcp(h.port)));
    t.after(() => idle.forEach((s) => s.destroy()));
    for (const socket of idle) {
      socket.on('error', () => {});
      assert.equal(await getOn(socket, '/healthz'), 200);
    }
    for (let i = 0; i < 5; i++) assert.equal(await probe(h.port), 200, `probe ${i}`);
  });

  it(`answers probes while ${HealthLimits.maxConnections} connections hold headers that never end (slowloris)`, async (t) => {
    await using h = await listening(createHealthServer({ isReady: () => true }));
    const slow = await Promise.all(Array.from({ length: HealthLimits.maxConnections }, () => openTcp(h.port)));
    t.after(() => slow.forEach((s) => s.destroy()));
    for (const socket of slow) {
      socket.on('error', () => {});
      socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n');
    }
    for (let i = 0; i < 5; i++) assert.equal(await probe(h.port), 200, `probe ${i}`);
  });

  it('closes a connection idle after its answer within a couple of seconds (a probe is one request)', async () => {
    await using h = await listening(createHealthServer({ isReady: () => true }));
    const socket = await openTcp(h.port);
    socket.on('error', () => {});
    assert.equal(await getOn(socket, '/healthz'), 200);
    assert.ok(await closedWithin(socket, 3500), 'the idle connection is closed');
  });
});

describe('the review port under idle connections (--max-connections)', () => {
  const MAX = 4;

  async function reviewServer(): Promise<Awaited<ReturnType<typeof listening<HttpsServer>>> & { ca: string; url: string }> {
    const certs = await makeTestCerts();
    const set = await loadTemplateSet('templates');
    const app = createAdmissionApp({ handlers: createHandlers({ templates: () => set }), bodyTimeout: 5 });
    const served = await listening(createAdmissionServer(app, certs.serving, { maxConnections: MAX }));
    return Object.assign(served, { ca: certs.ca.certPem, url: `https://127.0.0.1:${served.port}` });
  }

  /** A review on a new connection, as the apiserver dials one, within `ms`. */
  async function reviewWithin(url: string, ca: string, ms: number): Promise<void> {
    const started = Date.now();
    const { response } = await admit(url, ca, optedInPod());
    assert.equal(response.allowed, true);
    assert.ok(Date.now() - started < ms, `served after ${Date.now() - started} ms`);
  }

  it(`serves a new connection while ${MAX} idle TLS connections, each after one review, hold every slot; the oldest idle one is closed`, async (t) => {
    await using s = await reviewServer();
    const idle: Socket[] = [];
    t.after(() => idle.forEach((c) => c.destroy()));
    for (let i = 0; i < MAX; i++) {
      const socket = await openTls(s.port, s.ca);
      socket.on('error', () => {});
      const answered = new Promise((r) => socket.once('data', r));
      socket.write(rawPost('/mutate', JSON.stringify(podReview(optedInPod()))));
      await answered;
      idle.push(socket);
    }
    await reviewWithin(s.url, s.ca, 2000);
    assert.ok(await closedWithin(idle[0]!, 500), 'the oldest idle connection made room');
    assert.equal(idle[MAX - 1]!.destroyed, false, 'the youngest is kept');
  });

  it(`serves a new connection while ${MAX} TCP connections that never start TLS hold every slot, without waiting for the handshake timeout`, async (t) => {
    await using s = await reviewServer();
    const bare = await Promise.all(Array.from({ length: MAX }, () => openTcp(s.port)));
    t.after(() => bare.forEach((c) => c.destroy()));
    bare.forEach((c) => c.on('error', () => {}));
    await sleep(100);
    await reviewWithin(s.url, s.ca, 2000);
  });

  it('keeps the bound when every connection is busy: a new connection is closed, and served once one is free', async (t) => {
    await using s = await reviewServer();
    const body = JSON.stringify(podReview(optedInPod()));
    const busy = await Promise.all(Array.from({ length: MAX }, () => openTls(s.port, s.ca)));
    t.after(() => busy.forEach((c) => c.destroy()));
    for (const socket of busy) {
      socket.on('error', () => {});
      socket.write(rawPost('/mutate', body).slice(0, -10)); // a body still arriving: a request in progress
    }
    await sleep(200);
    const extra = await openTls(s.port, s.ca).then(
      (socket) => closedWithin(socket, 1000),
      () => true,
    );
    assert.ok(extra, 'the connection over the bound is closed');
    busy[0]!.destroy();
    await sleep(100);
    await reviewWithin(s.url, s.ca, 2000);
  });
});
