import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, request as httpRequest, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { base64Patch } from '../../src/admission/codec.js';
import { createHandlers } from '../../src/admission/handlers.js';
import { logReviews } from '../../src/admission/record.js';
import { injected } from '../../src/admission/verdict.js';
import type { InjectorError } from '../../src/errors.js';
import { createLogger, LOG_FIELD_MAX } from '../../src/log.js';
import { createAdmissionApp } from '../../src/server/admission-app.js';
import { createAdmissionServer } from '../../src/server/admission-server.js';
import { ReviewSlots } from '../../src/server/review-slots.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { admit, validatePod } from '../helpers/apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { errorCode } from '../helpers/client-go.js';
import { openTcp } from '../helpers/raw.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { makeTestCerts } from '../helpers/tls.js';

let server: TestServer;
let ca: string;
before(async () => {
  server = await startTestServer();
  ca = server.certs.ca.certPem;
});
after(() => server.close());

const names = (list: any[] | undefined) => (list ?? []).map((c) => c.name);
const env = (c: any, name: string) => c.env.find((e: any) => e.name === name)?.value;

describe('POST /mutate', () => {
  it('injects the default template into an opted-in pod (v1)', async () => {
    const { response, pod } = await admit(server.url, ca, optedInPod({ name: 'web' }), { namespace: 'shop' });
    assert.equal(response.allowed, true);
    assert.deepEqual(names(pod.spec.containers), ['web', 'log-shipper']);
    assert.deepEqual(names(pod.spec.volumes), ['app-logs']);
    assert.deepEqual(JSON.parse(pod.metadata.annotations['sidecar-injector.io/status']).templates, ['log-shipper']);
    assert.equal(env(pod.spec.containers[1], 'POD_NAMESPACE'), 'shop');
  });

  it('serves the path the apiserver calls, /mutate?timeout=10s, with the whole answer and its length', async () => {
    const review = podReview(optedInPod());
    const res = await httpsRequest(`${server.url}/mutate?timeout=10s`, JSON.stringify(review), { ca });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.text));
    assert.equal(res.headers['transfer-encoding'], undefined);
    assert.equal(res.json().response.uid, review.request.uid);
    assert.equal(typeof res.json().response.patch, 'string');
  });

  it('answers a v1beta1 review in v1beta1', async () => {
    const { response, pod } = await admit(server.url, ca, optedInPod(), { apiVersion: 'admission.k8s.io/v1beta1' });
    assert.equal(response.allowed, true);
    assert.deepEqual(names(pod.spec.containers), ['web', 'log-shipper']);
  });

  it('returns no patch when called again on its own output (reinvocation)', async () => {
    const first = await admit(server.url, ca, optedInPod({ annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' } }));
    assert.ok(first.ops.length > 0);
    const second = await admit(server.url, ca, first.pod);
    assert.equal(second.response.allowed, true);
    assert.equal(second.response.patch, undefined);
    assert.equal(second.response.warnings, undefined);
  });

  it('returns no patch after the apiserver defaulted the injected containers', async () => {
    const first = await admit(server.url, ca, optedInPod());
    const defaulted = structuredClone(first.pod);
    for (const c of defaulted.spec.containers)
      Object.assign(c, { imagePullPolicy: 'IfNotPresent', terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' });
    const second = await admit(server.url, ca, defaulted);
    assert.equal(second.response.patch, undefined);
    assert.equal(second.response.warnings, undefined);
  });

  it('leaves pods alone that opted out or never opted in', async () => {
    for (const labels of [{ 'sidecar-injector.io/inject': 'false' }, { 'sidecar-injector.io/inject': 'yes' }]) {
      const { response } = await admit(server.url, ca, optedInPod({ labels }));
      assert.equal(response.allowed, true);
      assert.equal(response.patch, undefined, JSON.stringify(labels));
    }
    const plain = { metadata: { name: 'p', annotations: { 'sidecar-injector.io/templates': 'proxy' } }, spec: { containers: [{ name: 'a', image: 'x' }] } };
    assert.equal((await admit(server.url, ca, plain)).response.patch, undefined);
  });

  it('injects a controller pod that has only generateName and no namespace in the object', async () => {
    const pod = optedInPod();
    assert.equal(pod.metadata.name, undefined);
    assert.equal(pod.metadata.namespace, undefined);
    const { pod: out } = await admit(server.url, ca, pod, { namespace: 'payments' });
    const sidecar = out.spec.containers.find((c: any) => c.name === 'log-shipper');
    // The pod's name comes from the downward API: at admission it is only the generateName (issue 21).
    assert.deepEqual(sidecar.env.find((e: any) => e.name === 'POD_NAME').valueFrom, { fieldRef: { fieldPath: 'metadata.name' } });
    assert.equal(env(sidecar, 'POD_NAMESPACE'), 'payments');
  });

  it('writes annotation and label keys with / correctly next to existing ones', async () => {
    const pod = optedInPod({
      annotations: { 'example.com/team': 'a', 'sidecar-injector.io/templates': 'log-shipper,proxy' },
      labels: { 'app.kubernetes.io/name': 'shop' },
    });
    const { pod: out, ops } = await admit(server.url, ca, pod);
    assert.ok(ops.some((o) => o.path === '/metadata/annotations/fluentbit.io~1exclude'));
    assert.equal(out.metadata.annotations['fluentbit.io/exclude'], 'true');
    assert.equal(out.metadata.annotations['example.com/team'], 'a');
    assert.equal(out.metadata.labels['sidecar-injector.io/proxy'], 'envoy');
    const sidecar = out.spec.containers.find((c: any) => c.name === 'log-shipper');
    assert.equal(env(sidecar, 'APP_NAME'), 'shop');
  });

  it('creates annotations, volumes and initContainers when the pod has none', async () => {
    const pod = optedInPod();
    pod.metadata.labels = { 'sidecar-injector.io/inject': 'true' };
    const review = await admit(server.url, ca, { ...pod, metadata: { ...pod.metadata, annotations: { 'sidecar-injector.io/templates': 'proxy' } } });
    assert.deepEqual(names(review.pod.spec.initContainers), ['proxy']);
    const bare = await admit(server.url, ca, pod);
    assert.ok(bare.ops.some((o) => o.op === 'add' && o.path === '/metadata/annotations'));
    assert.ok(bare.ops.some((o) => o.op === 'add' && o.path === '/spec/volumes'));
  });

  it('puts a native sidecar first in initContainers with restartPolicy Always', async () => {
    const pod = optedInPod({
      annotations: { 'sidecar-injector.io/templates': 'proxy' },
      spec: { initContainers: [{ name: 'migrate', image: 'migrate:1' }], containers: [{ name: 'web', image: 'nginx' }] },
    });
    const { pod: out, ops } = await admit(server.url, ca, pod);
    assert.deepEqual(names(out.spec.initContainers), ['proxy', 'migrate']);
    assert.equal(out.spec.initContainers[0].restartPolicy, 'Always');
    assert.deepEqual(names(out.spec.containers), ['web']);
    assert.equal(ops.filter((o) => o.path.startsWith('/spec/initContainers')).length, 1, 'one add, not a rewrite of the list');
  });

  it('keeps a sidecar the pod already has and warns that it differs', async () => {
    const pod = optedInPod({
      spec: {
        containers: [
          { name: 'web', image: 'nginx' },
          { name: 'log-shipper', image: 'fluent/fluent-bit:1.0' },
        ],
      },
    });
    const { pod: out, response } = await admit(server.url, ca, pod);
    assert.deepEqual(names(out.spec.containers), ['web', 'log-shipper']);
    assert.equal(out.spec.containers[1].image, 'fluent/fluent-bit:1.0');
    assert.ok(response.warnings.some((w: string) => w.includes('container "log-shipper"')));
  });

  it('injects two templates in the order the annotation names them', async () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'proxy,log-shipper' } });
    const { pod: out, response } = await admit(server.url, ca, pod);
    assert.deepEqual(JSON.parse(out.metadata.annotations['sidecar-injector.io/status']).templates, ['proxy', 'log-shipper']);
    assert.deepEqual(names(out.spec.initContainers), ['proxy']);
    assert.deepEqual(names(out.spec.containers), ['web', 'log-shipper']);
    assert.equal(response.warnings, undefined);
  });

  it('denies a pod that names an unknown template, naming it', async () => {
    const { response } = await admit(server.url, ca, optedInPod({ annotations: { 'sidecar-injector.io/templates': 'log-shipper,nope' } }));
    assert.equal(response.allowed, false);
    assert.equal(response.status.code, 400);
    assert.match(response.status.message, /"nope"/);
    assert.equal(response.patch, undefined);
  });

  it('allows anything that is not a pod CREATE unchanged', async () => {
    const update = podReview(optedInPod(), { operation: 'UPDATE' });
    const del = podReview(optedInPod(), { operation: 'DELETE' });
    delete del.request.object;
    const configMap = podReview({ metadata: { name: 'c' } });
    configMap.request.kind = { group: '', version: 'v1', kind: 'ConfigMap' };
    configMap.request.resource = { group: '', version: 'v1', resource: 'configmaps' };
    const binding = podReview(optedInPod());
    binding.request.subResource = 'binding';
    for (const review of [update, del, configMap, binding]) {
      const res = await httpsRequest(`${server.url}/mutate`, JSON.stringify(review), { ca });
      assert.equal(res.status, 200);
      const response = res.json().response;
      assert.equal(response.uid, review.request.uid);
      assert.equal(response.allowed, true);
      assert.equal(response.patch, undefined);
      assert.equal(response.patchType, undefined);
    }
  });
});

describe('the examples in examples/', () => {
  for (const file of ['review-v1.json', 'review-v1beta1-controller-pod.json']) {
    it(`${file} is injected, and the result passes /validate`, async () => {
      const review = JSON.parse(await readFile(join('examples', file), 'utf8'));
      const opts = { apiVersion: review.apiVersion, namespace: review.request.namespace };
      const { response, pod } = await admit(server.url, ca, review.request.object, opts);
      assert.equal(response.allowed, true);
      assert.ok(pod.spec.containers.some((c: any) => c.name === 'log-shipper'));
      assert.equal((await validatePod(server.url, ca, pod, opts)).allowed, true);
    });
  }
});

describe('POST /validate', () => {
  it('allows an injected pod, also after another webhook pinned the image to a digest', async () => {
    const { pod } = await admit(server.url, ca, optedInPod({ annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' } }));
    assert.equal((await validatePod(server.url, ca, pod)).allowed, true);
    pod.spec.containers[1].image = 'cr.fluentbit.io/fluent/fluent-bit@sha256:' + 'a'.repeat(64);
    pod.spec.initContainers[0].image = 'envoyproxy/envoy:v1.33.0';
    assert.equal((await validatePod(server.url, ca, pod)).allowed, true);
  });

  it('rejects an opted-in pod without its sidecars, naming each missing piece', async () => {
    const response = await validatePod(server.url, ca, optedInPod({ annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' } }));
    assert.equal(response.allowed, false);
    assert.equal(response.status.code, 403);
    for (const piece of ['container "log-shipper"', 'volume "app-logs"', 'native sidecar "proxy"']) {
      assert.ok(response.status.message.includes(piece), `${piece} in ${response.status.message}`);
    }
  });

  it('rejects a sidecar whose image repository was swapped', async () => {
    const { pod } = await admit(server.url, ca, optedInPod());
    pod.spec.containers[1].image = 'evil.example.com/fluent-bit:3.2.4';
    const response = await validatePod(server.url, ca, pod);
    assert.equal(response.allowed, false);
    assert.match(response.status.message, /image repository cr\.fluentbit\.io\/fluent\/fluent-bit/);
  });

  it('rejects a native sidecar that is not in initContainers with restartPolicy Always', async () => {
    const { pod } = await admit(server.url, ca, optedInPod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }));
    delete pod.spec.initContainers[0].restartPolicy;
    assert.equal((await validatePod(server.url, ca, pod)).allowed, false);
  });

  it('does not trust the status annotation', async () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/status': '{"templates":["log-shipper"],"digest":"x"}' } });
    assert.equal((await validatePod(server.url, ca, pod)).allowed, false);
  });

  it('allows pods that did not opt in and answers v1beta1 in v1beta1', async () => {
    const pod = { metadata: { name: 'p' }, spec: { containers: [{ name: 'a', image: 'x' }] } };
    assert.equal((await validatePod(server.url, ca, pod, { apiVersion: 'admission.k8s.io/v1beta1' })).allowed, true);
  });
});

describe('bad requests', () => {
  const review = JSON.stringify(podReview(optedInPod()));
  const cases: { name: string; path?: string; method?: string; body?: string | Buffer; type?: string | null; status: number; code: string }[] = [
    { name: 'wrong Content-Type', type: 'text/plain', body: review, status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'no Content-Type', type: null, body: review, status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'empty body', body: '', status: 400, code: 'BODY_EMPTY' },
    { name: 'malformed JSON', body: '{"apiVersion":', status: 400, code: 'BODY_MALFORMED' },
    { name: 'JSON that is not an AdmissionReview', body: '{"kind":"Pod"}', status: 400, code: 'REVIEW_INVALID' },
    {
      name: 'a review without request.uid',
      body: '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}',
      status: 400,
      code: 'REVIEW_INVALID',
    },
    { name: 'a body over 7 MiB', body: Buffer.alloc(7 * 1024 * 1024 + 1, 0x20), status: 413, code: 'BODY_TOO_LARGE' },
    { name: 'an unknown path', path: '/inject', body: review, status: 404, code: 'NOT_FOUND' },
    { name: 'GET on /mutate', method: 'GET', status: 405, code: 'METHOD_NOT_ALLOWED' },
  ];
  for (const c of cases) {
    it(`answers ${c.status} with a Status naming the error for ${c.name}, and keeps serving`, async () => {
      const res = await httpsRequest(`${server.url}${c.path ?? '/mutate'}`, c.body, {
        ca,
        method: c.method ?? 'POST',
        contentType: c.type === undefined ? 'application/json' : c.type,
      });
      assert.equal(res.status, c.status, res.text);
      const body = res.json();
      assert.equal(errorCode(body), c.code);
      assert.equal(typeof body.message, 'string');
      if (c.status === 405) assert.equal(res.headers['allow'], 'POST');
      const ok = await admit(server.url, ca, optedInPod());
      assert.equal(ok.response.allowed, true);
    });
  }

  it('accepts application/json with a charset parameter', async () => {
    const res = await httpsRequest(`${server.url}/mutate`, review, { ca, contentType: 'application/json; charset=utf-8' });
    assert.equal(res.status, 200);
  });
});

describe('health port', () => {
  const get = (path: string) =>
    new Promise<number>((resolve, reject) => {
      httpRequest(`${server.healthUrl}${path}`, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
  it('answers /healthz and /readyz once templates and certificate are loaded', async () => {
    assert.equal(await get('/healthz'), 200);
    assert.equal(await get('/readyz'), 200);
    assert.equal(await get('/nope'), 404);
  });
});

describe('review slots', () => {
  /** A stand-in for a connection: destroy() closes it. */
  class FakeSocket extends EventEmitter {
    destroyed = false;
    destroy(): void {
      this.destroyed = true;
      this.emit('close');
    }
  }
  /**
   * A stand-in for a ServerResponse, as Node drives one: with its connection, it emits 'close'
   * when the connection closes; queued behind another answer (`queued`), it has no socket yet and
   * emits nothing.
   */
  class FakeResponse extends EventEmitter {
    readonly req = { socket: new FakeSocket() };
    socket: FakeSocket | null;
    constructor(queued = false) {
      super();
      this.socket = queued ? null : this.req.socket;
      if (!queued) this.req.socket.on('close', () => this.emit('close'));
    }
    get destroyed(): boolean {
      return this.req.socket.destroyed;
    }
    /** The answer handed to the socket: Node emits 'finish', then 'close' on the next tick. */
    flushed(): void {
      this.emit('finish');
      this.emit('close');
    }
  }
  const fake = (queued = false): FakeResponse & ServerResponse => new FakeResponse(queued) as unknown as FakeResponse & ServerResponse;

  it('holds a slot until the answer is flushed or the connection closes, and refuses one more with OVERLOADED', () => {
    const slots = new ReviewSlots(2, 60_000);
    const [a, b] = [fake(), fake()];
    slots.hold(a);
    slots.hold(b);
    assert.throws(
      () => slots.hold(fake()),
      (err: InjectorError) => err.code === 'OVERLOADED' && err.status === 429,
    );
    a.flushed();
    a.emit('close'); // a second 'close' (the connection going later): the slot is given back once
    slots.hold(fake());
    assert.throws(() => slots.hold(fake()), /too many reviews/);
    b.emit('close');
    slots.hold(fake());
  });

  it('closes the connection of an answer its client has not taken in time, which frees the slot', async () => {
    const slots = new ReviewSlots(1, 50);
    const unread = fake();
    slots.hold(unread);
    assert.throws(() => slots.hold(fake()), /too many reviews/);
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(unread.destroyed, true);
    slots.hold(fake());
  });

  it('gives back the slots of answers queued behind another on a connection (pipelining) when the connection closes', () => {
    const slots = new ReviewSlots(2, 60_000);
    const [first, second] = [fake(true), fake(true)];
    // Two answers queued on one connection: Node never emits 'close' on them if it goes first.
    (second as unknown as { req: { socket: FakeSocket } }).req.socket = first.req.socket as FakeSocket;
    slots.hold(first);
    slots.hold(second);
    assert.throws(() => slots.hold(fake()), /too many reviews/);
    assert.equal(first.req.socket.listenerCount('close'), 1, 'one listener for the connection');
    (first.req.socket as FakeSocket).destroy();
    slots.hold(fake());
    slots.hold(fake());
  });

  it("gives a queued answer's slot back once when it is later sent, and at once when its connection is already gone", () => {
    const slots = new ReviewSlots(1, 60_000);
    const queued = fake(true);
    slots.hold(queued);
    queued.flushed(); // its turn came: Node gave it the socket, and it was sent
    (queued.req.socket as FakeSocket).destroy(); // then the connection went: no second release
    slots.hold(fake());
    assert.throws(() => slots.hold(fake()), /too many reviews/);
    const slots2 = new ReviewSlots(1, 60_000);
    const late = fake(true);
    (late.req.socket as FakeSocket).destroy();
    slots2.hold(late);
    slots2.hold(fake());
  });

  it("leaves a flushed answer's connection open", async () => {
    const slots = new ReviewSlots(1, 50);
    const read = fake();
    slots.hold(read);
    read.flushed();
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(read.destroyed, false);
  });
});

describe('the review listener over TLS', () => {
  it('gives a slot back once each answer is flushed, and keeps answering when an observer throws', async (t) => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on('warning', onWarning);
    t.after(() => process.off('warning', onWarning));
    const certs = await makeTestCerts();
    const set = await loadTemplateSet('templates');
    const observers = [
      (): void => {
        throw new Error('an observer bug');
      },
    ];
    // One slot: a slot not given back after an answer would refuse the next review with a 429.
    const server = createAdmissionServer(createAdmissionApp({ handlers: createHandlers({ templates: () => set }), maxInflight: 1, observers }), certs.serving);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/mutate`;
    for (let i = 0; i < 20; i++) {
      const res = await httpsRequest(url, JSON.stringify(podReview(optedInPod(), { uid: `u-${i}` })), { ca: certs.ca.certPem });
      assert.equal(res.status, 200, res.text);
    }
    await new Promise((r) => setImmediate(r));
    assert.ok(warnings.includes('an observer bug'), warnings.join());
  });
});

describe('pipelined reviews', () => {
  it('give their slots back when their client goes before the answers queued on its connection were sent', async (t) => {
    // The first answer is large and the client does not read it, so the next two wait behind it,
    // without a socket; then the client goes. Every slot must come back.
    const big = base64Patch('x'.repeat(3 * 1024 * 1024));
    const handlers = { byPath: new Map([['/mutate', () => injected('injected', [], 1, big, [])]]), generation: () => undefined };
    const MAX = 9;
    const server = createHttpServer(createAdmissionApp({ handlers, maxInflight: MAX }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const port = (server.address() as AddressInfo).port;
    const body = JSON.stringify(podReview(optedInPod()));
    const post = `POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const clients = await Promise.all([0, 1, 2].map(() => openTcp(port)));
    for (const c of clients) {
      c.on('error', () => {});
      c.pause();
      c.write(post.repeat(3));
    }
    await new Promise((r) => setTimeout(r, 500));
    for (const c of clients) c.destroy();
    await new Promise((r) => setTimeout(r, 200));
    // As many reviews as there are slots, each holding its slot (its client reads only the first
    // bytes of the large answer): a slot lost above would answer one of them 429.
    const statuses = await Promise.all(
      Array.from({ length: MAX }, async () => {
        const c = await openTcp(port);
        t.after(() => c.destroy());
        const first = new Promise<string>((resolve) => c.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1', 0, 12))));
        c.write(post);
        const line = await first;
        c.pause();
        return Number(line.slice(9, 12));
      }),
    );
    assert.deepEqual(
      statuses,
      Array.from({ length: MAX }, () => 200),
    );
  });
});

describe('log lines', () => {
  it('cut the values taken from the request to a few hundred characters', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void lines.push(line) });
    const certs = await makeTestCerts();
    const set = await loadTemplateSet('templates');
    const app = createAdmissionApp({ handlers: createHandlers({ templates: () => set }), observers: [logReviews(logger)] });
    const srv = createAdmissionServer(app, certs.serving);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    try {
      const long = 'a'.repeat(100_000);
      const review = podReview(optedInPod({ name: long }), { namespace: long, operation: long, uid: long });
      const res = await httpsRequest(`${url}/mutate`, JSON.stringify(review), { ca: certs.ca.certPem });
      assert.equal(res.status, 200);
      const bad = await httpsRequest(`${url}/${long.slice(0, 7000)}`, '{}', { ca: certs.ca.certPem });
      assert.equal(bad.status, 404);
      assert.equal(lines.length, 2);
      const [line, warn] = lines.map((l) => JSON.parse(l));
      for (const field of ['uid', 'operation', 'namespace', 'pod']) {
        assert.ok(line[field].length <= LOG_FIELD_MAX + 32, `${field} is ${line[field].length} characters`);
        assert.match(line[field], /^a+\.\.\.\(\d+ more\)$/);
      }
      assert.ok(lines[1]!.length < 2 * 1024, `the bad-request line is ${lines[1]!.length} characters`);
      assert.equal(warn.code, 'NOT_FOUND');
    } finally {
      srv.closeAllConnections();
      await new Promise((r) => srv.close(r));
    }
  });
});

describe('the record of a body refused before it was decoded', () => {
  it('carries the uid its apiserver envelope claims when it is clean, and none otherwise', async (t) => {
    const set = await loadTemplateSet('templates');
    const records: { uid: string; code?: string }[] = [];
    const server = createHttpServer(createAdmissionApp({ handlers: createHandlers({ templates: () => set }), observers: [(r) => void records.push(r)] }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const post = (body: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port,
            path: '/mutate',
            method: 'POST',
            agent: false,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const prefix = '{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"';
    assert.equal(await post(`${prefix}0f1e2d3c-aaaa-4bbb-8ccc-1234567890ab","object":{`), 400);
    assert.equal(await post(`${prefix}not a uuid","object":{`), 400);
    assert.equal(await post(`{"uid":"0f1e2d3c-aaaa-4bbb-8ccc-1234567890ab",`), 400);
    assert.deepEqual(
      records.map((r) => [r.uid, r.code]),
      [
        ['0f1e2d3c-aaaa-4bbb-8ccc-1234567890ab', 'BODY_MALFORMED'],
        ['', 'BODY_MALFORMED'],
        ['', 'BODY_MALFORMED'],
      ],
    );
  });
});
