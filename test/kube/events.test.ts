import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ReviewRecord } from '../../src/admission/record.js';
import { ownerEvents, upperCamel, type OwnerEventResult } from '../../src/kube/events.js';
import { httpsRequest } from '../helpers/client.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { eventually } from '../helpers/sidecartemplates.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A pod of ReplicaSet `owner` (its controller ownerReference, as the ReplicaSet controller writes it) that names a template no one serves. */
function replicaSetPod(owner: string | undefined, template = 'nope'): any {
  const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': template } });
  if (owner !== undefined)
    pod.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: owner, uid: uidOf(owner), controller: true, blockOwnerDeletion: true }];
  return pod;
}

const uidOf = (owner: string): string => `00000000-0000-4000-8000-${Buffer.from(owner).toString('hex').padEnd(12, '0').slice(0, 12)}`;

async function review(server: TestServer, pod: object, opts: { dryRun?: boolean; path?: string } = {}): Promise<any> {
  const body = podReview(pod, { namespace: 'shop' });
  if (opts.dryRun === true) body.request.dryRun = true;
  const res = await httpsRequest(`${server.url}${opts.path ?? '/mutate'}`, JSON.stringify(body), { ca: server.certs.ca.certPem });
  assert.equal(res.status, 200);
  return res.json().response;
}

/** The Events on `owner`, once at least `n` of them (or of `control`'s) have arrived; the injector creates them after its answer. */
async function eventsOn(
  api: FakeApiServer,
  owner: string,
  until: () => boolean = () => api.createdEvents.some((e) => e.involvedObject.name === owner),
): Promise<any[]> {
  const deadline = Date.now() + 10_000;
  while (!until()) {
    if (Date.now() > deadline) assert.fail(`no Event arrived (have: ${api.createdEvents.map((e) => e.involvedObject.name).join(', ')})`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return api.createdEvents.filter((e) => e.involvedObject.name === owner);
}

/** Waits for the Event on `control`, reviewed after the others: one Event is created at a time, in order, so any Event the others made has arrived before it. */
async function afterControl(server: TestServer, api: FakeApiServer, control: string): Promise<void> {
  await review(server, replicaSetPod(control));
  await eventsOn(api, control);
}

async function ownerEventCounts(server: TestServer): Promise<Record<string, number>> {
  const metric = server.running.metrics.registry.getSingleMetric('sidecar_injector_owner_events_total');
  assert.ok(metric, 'sidecar_injector_owner_events_total is exported');
  return Object.fromEntries((await metric.get()).values.map((v) => [String(v.labels['result']), v.value]));
}

describe('owner events through the real server and the API stand-in', () => {
  let api: FakeApiServer;
  let server: TestServer | undefined;
  before(async () => {
    api = await startFakeApiServer();
  });
  after(() => api.close());
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  const start = async (flags: readonly string[] = []): Promise<TestServer> => (server = await startTestServer(['--kubeconfig', api.kubeconfig, ...flags]));

  it("puts one Warning Event on the ReplicaSet of a pod naming an unknown template, with the reason and the denial's message", async () => {
    const s = await start();
    const response = await review(s, replicaSetPod('web-5d4f8c7b9'));
    assert.equal(response.allowed, false);
    const [event, ...more] = await eventsOn(api, 'web-5d4f8c7b9');
    assert.equal(more.length, 0);
    assert.deepEqual(event.involvedObject, {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      name: 'web-5d4f8c7b9',
      namespace: 'shop',
      uid: uidOf('web-5d4f8c7b9'),
    });
    assert.equal(event.metadata.namespace, 'shop');
    assert.equal(event.type, 'Warning');
    assert.equal(event.reason, 'UnknownTemplate');
    assert.equal(event.message, response.status.message);
    assert.match(event.message, /"nope"/);
    assert.equal(event.source.component, 'sidecar-injector');
    assert.equal(event.count, 1);
    // Counted once the API has answered the POST, which the stand-in recorded on receipt: wait for it.
    await eventually(async () => (await ownerEventCounts(s))['sent'] === 1, 'the Event counted as sent', 5000);
    assert.equal((await ownerEventCounts(s))['sent'], 1);
  });

  it("puts the Event on the ReplicaSet's Deployment when the ReplicaSet names one, where kubectl describe deployment shows it", async () => {
    const s = await start();
    api.putObject({
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: {
        name: 'shop-6f7a8b9c0',
        namespace: 'shop',
        uid: uidOf('shop-6f7a8b9c0'),
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'shop', uid: uidOf('shop'), controller: true, blockOwnerDeletion: true }],
      },
    });
    const response = await review(s, replicaSetPod('shop-6f7a8b9c0'));
    const [event, ...more] = await eventsOn(api, 'shop');
    assert.equal(more.length, 0);
    assert.deepEqual(event.involvedObject, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'shop', namespace: 'shop', uid: uidOf('shop') });
    assert.equal(event.reason, 'UnknownTemplate');
    assert.equal(event.message, `${response.status.message} (pods of ReplicaSet shop-6f7a8b9c0)`);
    assert.deepEqual(await eventsOn(api, 'shop-6f7a8b9c0', () => true), [], 'not on the ReplicaSet as well');
  });

  it('puts the Event of a pod the validator refuses (sidecars missing) on its ReplicaSet', async () => {
    const s = await start();
    const response = await review(s, replicaSetPod('api-6b7c8d9f0', 'log-shipper'), { path: '/validate' });
    assert.equal(response.allowed, false);
    const [event] = await eventsOn(api, 'api-6b7c8d9f0');
    assert.equal(event.reason, 'SidecarsMissing');
    assert.equal(event.message, response.status.message);
  });

  it('makes no Event for a dry run', async () => {
    const s = await start();
    const response = await review(s, replicaSetPod('dry-7f6e5d4c3'), { dryRun: true });
    assert.equal(response.allowed, false);
    await afterControl(s, api, 'dry-control');
    assert.deepEqual(await eventsOn(api, 'dry-7f6e5d4c3', () => true), []);
  });

  it('makes one Event for 50 pods of one ReplicaSet refused within a second, and counts the rest as limited', async () => {
    const s = await start();
    const responses = await Promise.all(Array.from({ length: 50 }, () => review(s, replicaSetPod('burst-8a9b0c1d2'))));
    assert.ok(responses.every((r) => r.allowed === false));
    await afterControl(s, api, 'burst-control');
    assert.equal((await eventsOn(api, 'burst-8a9b0c1d2', () => true)).length, 1);
    // The injector counts an Event sent once the API's answer reaches it, which may come after the test saw the Event there.
    const end = Date.now() + 10_000;
    while ((await ownerEventCounts(s))['sent'] !== 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    const counts = await ownerEventCounts(s);
    assert.equal(counts['limited'], 49);
    assert.equal(counts['sent'], 2);
  });

  it('makes no Event for a pod without a controller (Events go on the owner only)', async () => {
    const s = await start();
    const before = api.createdEvents.length;
    const response = await review(s, replicaSetPod(undefined));
    assert.equal(response.allowed, false);
    await afterControl(s, api, 'ownerless-control');
    assert.deepEqual(
      api.createdEvents.slice(before).map((e) => e.involvedObject.name),
      ['ownerless-control'],
    );
  });

  it('makes no Event with --owner-events=off', async () => {
    const s = await start(['--owner-events', 'off']);
    const response = await review(s, replicaSetPod('off-9c8b7a6f5'));
    assert.equal(response.allowed, false);
    // Nothing to wait for: give an Event that should not come a generous while.
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(await eventsOn(api, 'off-9c8b7a6f5', () => true), []);
    assert.equal(api.calls.filter((c) => c.path.endsWith('/events')).length, api.createdEvents.length, 'every Event call was a create');
  });
});

describe('ownerEvents', () => {
  const record = (owner: string, reason = 'unknown-template', namespace = 'shop'): ReviewRecord => ({
    endpoint: '/mutate',
    uid: randomUUID(),
    operation: 'CREATE',
    namespace,
    pod: 'web-',
    decision: 'denied',
    reason,
    templates: [],
    patchOps: 0,
    cached: false,
    durationMs: 1,
    ownerEvent: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: owner, uid: '', dryRun: false, message: 'm' },
  });
  const tally = (): { counts: Record<string, number>; count: (r: OwnerEventResult) => void } => {
    const counts: Record<string, number> = {};
    return { counts, count: (r) => void (counts[r] = (counts[r] ?? 0) + 1) };
  };

  it('creates at most perSecond Events a second over all owners of all namespaces', async () => {
    const created: string[] = [];
    const { counts, count } = tally();
    let now = 1_000_000;
    const events = ownerEvents({ create: async (_ns, e) => created.push(e.involvedObject.name ?? ''), count, now: () => now });
    for (let i = 0; i < 10; i++) events.observe(record(`rs-${i}`, 'unknown-template', `team-${i}`));
    now += 1000;
    events.observe(record('rs-next-second'));
    await events.close().then(() => new Promise((r) => setImmediate(r)));
    assert.equal(counts['limited'], 5);
    assert.equal(counts['sent'] ?? 0, created.length);
  });

  it('drops an Event the full queue has no room for, and tells an owner again of a reason once the interval has passed', async () => {
    const { counts, count } = tally();
    let now = 5_000_000;
    let release = (): void => undefined;
    const created: string[] = [];
    const events = ownerEvents({
      create: (_ns, e) => {
        created.push(`${e.involvedObject.name}:${e.reason}`);
        return new Promise((r) => (release = () => r(undefined)));
      },
      count,
      queueSize: 2,
      perSecond: 100,
      intervalMs: 60_000,
      now: () => now,
    });
    // Owners of three namespaces: the queue of 2 is full whoever asks.
    events.observe(record('a', 'unknown-template', 'team-a'));
    events.observe(record('b', 'unknown-template', 'team-b'));
    events.observe(record('c', 'unknown-template', 'team-c'));
    assert.equal(counts['dropped'], 1);
    events.observe(record('a', 'override-refused', 'team-a'));
    assert.equal(counts['dropped'], 2, 'another reason is another Event');
    now += 60_000;
    await new Promise((r) => setImmediate(r));
    release();
    await new Promise((r) => setImmediate(r));
    release();
    await new Promise((r) => setImmediate(r));
    events.observe(record('a', 'unknown-template', 'team-a'));
    release();
    await new Promise((r) => setImmediate(r));
    release();
    await events.close();
    assert.deepEqual(created, ['a:UnknownTemplate', 'b:UnknownTemplate', 'a:UnknownTemplate']);
  });

  it("leaves other namespaces their Events while one namespace's pods are refused without pause", async () => {
    const created: string[] = [];
    const { counts, count } = tally();
    let now = 9_000_000;
    const events = ownerEvents({ create: async (ns, e) => void created.push(`${ns}/${e.involvedObject.name}`), count, now: () => now });
    for (let second = 0; second < 5; second++) {
      // A hundred refusals a second in the noisy namespace, each of another ReplicaSet, before the quiet namespaces' one each.
      for (let i = 0; i < 100; i++) events.observe(record(`rs-${second}-${i}`, 'unknown-template', 'noisy'));
      events.observe(record(`quiet-${second}`, 'unknown-template', 'quiet'));
      events.observe(record(`calm-${second}`, 'unknown-template', 'calm'));
      await new Promise((r) => setImmediate(r));
      now += 1000;
    }
    await events.close().then(() => new Promise((r) => setImmediate(r)));
    const from = (ns: string): number => created.filter((c) => c.startsWith(`${ns}/`)).length;
    assert.equal(from('quiet'), 5, 'every quiet Event created');
    assert.equal(from('calm'), 5, 'every calm Event created');
    assert.equal(from('noisy'), 10, 'the noisy namespace: two a second');
    assert.equal(counts['limited'], 490);
  });

  it('spells reasons as Kubernetes Events do', () => {
    assert.equal(upperCamel('unknown-template'), 'UnknownTemplate');
    assert.equal(upperCamel('sidecars-missing'), 'SidecarsMissing');
  });
});
