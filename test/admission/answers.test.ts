import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { Agent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { AnswerCache } from '../../src/admission/answers.js';
import { decodeBody, ReviewVersion } from '../../src/admission/codec.js';
import { httpsRequest, type HttpResult } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 60);

/** The apiserver's text for a review of `pod` with `uid` (podReview keeps the apiserver's field order). */
const reviewText = (pod: object, uid: string, opts: { apiVersion?: string; namespace?: string } = {}): string =>
  JSON.stringify(podReview(pod, { ...opts, uid }));

function scrape(server: TestServer): Promise<string> {
  return new Promise((resolve, reject) => {
    httpRequest(`${server.healthUrl}/metrics`, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    })
      .on('error', reject)
      .end();
  });
}

async function lookups(server: TestServer, endpoint: string, result: 'hit' | 'miss'): Promise<number> {
  const m = new RegExp(`^sidecar_injector_answer_cache_lookups_total\\{endpoint="${endpoint}",result="${result}"\\} (\\d+)$`, 'm').exec(await scrape(server));
  return Number(m?.[1] ?? 0);
}

describe('the answer cache, through the server', () => {
  let cached: TestServer;
  let fresh: TestServer;
  let agent: Agent;

  before(async () => {
    [cached, fresh] = await Promise.all([startTestServer(), startTestServer(['--answer-cache-mb', '0'])]);
    agent = new Agent({ keepAlive: true, maxSockets: 1 });
  });
  after(async () => {
    agent.destroy();
    await Promise.all([cached.close(), fresh.close()]);
  });

  const post = (server: TestServer, path: string, text: string): Promise<HttpResult> =>
    httpsRequest(`${server.url}${path}`, text, { ca: server.certs.ca.certPem, agent });

  /** Sends `text` to both servers and asserts the same status and the same bytes back. */
  async function sameAnswer(path: string, text: string): Promise<HttpResult> {
    const [a, b] = [await post(cached, path, text), await post(fresh, path, text)];
    assert.equal(a.status, b.status);
    assert.equal(a.text, b.text, `the cached server's answer differs for ${text.slice(0, 120)}…`);
    return a;
  }

  it('answers the pods of one ReplicaSet from the first answer, with the bytes a fresh computation gives', async () => {
    const [hits, misses] = [await lookups(cached, 'mutate', 'hit'), await lookups(cached, 'mutate', 'miss')];
    const web = optedInPod();
    const named = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' }, labels: { team: 'päyments "eu"' } });
    const unknown = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'nope' } });
    const plain = { metadata: { generateName: 'plain-' }, spec: { containers: [{ name: 'a', image: 'a' }] } };
    const sequence: [object, string?][] = [
      [web],
      [web],
      [web],
      [web], // computed, computed again with another uid and kept, two hits
      [named],
      [named],
      [named],
      [web, ReviewVersion.V1Beta1],
      [web, ReviewVersion.V1Beta1],
      [web, ReviewVersion.V1Beta1], // another version, another entry
      [unknown],
      [unknown],
      [unknown], // denials repeat too
      [plain],
      [plain],
      [plain], // and skips
      [web], // still there
    ];
    for (const [pod, apiVersion] of sequence) {
      const uid = randomUUID();
      const res = await sameAnswer('/mutate', reviewText(pod, uid, apiVersion === undefined ? {} : { apiVersion }));
      assert.equal(res.json().response.uid, uid);
      assert.equal(res.json().apiVersion, apiVersion ?? ReviewVersion.V1);
    }
    const injected = await post(cached, '/mutate', reviewText(web, randomUUID()));
    assert.ok(decodePatch(injected.json().response).length > 0, 'a cached answer still carries the patch');
    assert.equal((await lookups(cached, 'mutate', 'hit')) - hits, 8);
    assert.equal((await lookups(cached, 'mutate', 'miss')) - misses, 10);
  });

  it('answers the validating endpoint from its own entries', async () => {
    const before = await lookups(cached, 'validate', 'hit');
    for (let i = 0; i < 4; i++) {
      const res = await sameAnswer('/validate', reviewText(optedInPod(), randomUUID(), { namespace: 'shop' }));
      assert.equal(res.json().response.allowed, false, 'the pod has no sidecars');
    }
    assert.equal((await lookups(cached, 'validate', 'hit')) - before, 2);
  });

  it('computes every answer for bodies not in the apiserver encoding', async () => {
    const before = await lookups(cached, 'mutate', 'hit');
    const review = podReview(optedInPod(), { uid: 'a' });
    const variants = [
      (uid: string) => JSON.stringify({ apiVersion: review.apiVersion, kind: review.kind, request: { ...review.request, uid } }), // another field order
      (uid: string) => JSON.stringify({ ...review, request: { ...review.request, uid } }, null, 1), // whitespace
      (uid: string) => reviewText(optedInPod(), `${uid}\\u0041`), // an escape in the uid
      (uid: string) => reviewText(optedInPod(), `${uid}-é`), // a uid beyond printable ASCII
    ];
    for (const variant of variants) {
      for (let i = 0; i < 3; i++) await sameAnswer('/mutate', variant(randomUUID()));
    }
    assert.equal(await lookups(cached, 'mutate', 'hit'), before);
  });

  it('never answers from a uid token that a later duplicate key shadows', async () => {
    const text = (first: string, last: string) =>
      reviewText(optedInPod({ labels: { shadow: 'test' } }), last).replace(`"request":{"uid":"${last}"`, `"request":{"uid":"${first}","uid":"${last}"`);
    // A first token that differs from the parsed uid is never kept.
    for (const decoy of ['decoy-1', 'decoy-2']) assert.equal((await sameAnswer('/mutate', text(decoy, 'real'))).json().response.uid, 'real');
    // A first token equal to the parsed one is seen once; the same text again proves nothing about
    // the token, and a review with another first token parses to another uid: nothing is kept.
    for (let i = 0; i < 2; i++) assert.equal((await sameAnswer('/mutate', text('same', 'same'))).json().response.uid, 'same');
    assert.equal((await sameAnswer('/mutate', text('other', 'same'))).json().response.uid, 'same');
    assert.equal((await sameAnswer('/mutate', text('third', 'same'))).json().response.uid, 'same');
  });

  it('gives the same bytes as a fresh computation for generated pods, versions and uids', async () => {
    const label = fc.string({ unit: fc.constantFrom('a', 'z', '-', '"', '\\', 'é', '\u2028', '/', '~', '{{', '}}'), maxLength: 6 });
    const uid = fc.oneof(fc.uuid(), fc.string({ unit: fc.constantFrom('a', '0', '-', '"', '\\', ' ', 'é', '\u0001'), minLength: 1, maxLength: 8 }));
    const review = fc.record({
      labels: fc.dictionary(fc.constantFrom('app', 'team', 'tier', 'example.com/x'), label, { maxKeys: 3 }),
      templates: fc.constantFrom(undefined, 'log-shipper', 'proxy', 'log-shipper,proxy', 'missing'),
      optIn: fc.boolean(),
      namespace: fc.constantFrom('default', 'shop', ''),
      apiVersion: fc.constantFrom(ReviewVersion.V1, ReviewVersion.V1Beta1),
      uids: fc.array(uid, { minLength: 2, maxLength: 4 }),
    });
    await fc.assert(
      fc.asyncProperty(review, async (r) => {
        const pod = optedInPod({ labels: r.labels, ...(r.templates !== undefined && { annotations: { 'sidecar-injector.io/templates': r.templates } }) });
        if (!r.optIn) delete pod.metadata.labels['sidecar-injector.io/inject'];
        for (const u of r.uids)
          await sameAnswer(r.templates === 'missing' ? '/validate' : '/mutate', reviewText(pod, u, { apiVersion: r.apiVersion, namespace: r.namespace }));
      }),
      { numRuns: RUNS },
    );
  });
});

describe('the answer cache and template reloads', () => {
  let dir: string;
  let server: TestServer;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'answers-reload-'));
    await cp('templates', dir, { recursive: true });
    server = await startTestServer(['--templates-dir', dir, '--templates-poll-seconds', '1']);
  });
  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('answers under the new set after a reload, never from an answer made under the old one', async () => {
    const send = async () => {
      const res = await httpsRequest(`${server.url}/mutate`, reviewText(optedInPod(), randomUUID()), { ca: server.certs.ca.certPem });
      return JSON.stringify(decodePatch(res.json().response));
    };
    for (let i = 0; i < 3; i++) assert.match(await send(), /fluent-bit:3\.2\.4/);
    const file = join(dir, 'log-shipper.yaml');
    await writeFile(file, (await readFile(file, 'utf8')).replace('fluent-bit:3.2.4', 'fluent-bit:3.2.5'));
    const deadline = Date.now() + 10_000;
    while (!/sidecar_injector_template_reloads_total\{result="success"\} 1/.test(await scrape(server))) {
      assert.ok(Date.now() < deadline, 'the edit was not reloaded within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    for (let i = 0; i < 3; i++) assert.match(await send(), /fluent-bit:3\.2\.5/);
  });
});

describe('AnswerCache', () => {
  const generation = { name: 'a set' };

  /**
   * One review through the cache as the pipeline runs it: the value kept, or undefined when the
   * review was run (and `value()` offered). `under`: the generation of every namespace, or of each.
   */
  function review(cache: AnswerCache<string>, text: string, under: unknown = generation, value = (): string => 'kept'): string | undefined {
    const generationOf = (namespace: string): unknown => (typeof under === 'function' ? under(namespace) : under);
    const body = Buffer.from(text);
    const slot = cache.slot(body);
    const kept = slot && cache.get(slot, generationOf);
    if (kept !== undefined) return kept;
    const parsed = decodeBody(text);
    if (slot !== undefined) cache.offer(slot, parsed, value(), 100, generationOf(parsed.request.namespace ?? ''));
    return undefined;
  }

  it('keeps a value once two reviews of one body with different uids were run, and gives it for every later one', () => {
    const cache = new AnswerCache<string>(1024 * 1024);
    const answers = ['u-1', 'u-2', 'u-3', 'u-4'].map((uid) => review(cache, reviewText(optedInPod(), uid)));
    assert.deepEqual(
      answers.map((a) => a !== undefined),
      [false, false, true, true],
    );
    assert.equal(cache.size.entries, 1);
  });

  it('keeps nothing for a body sent again with the same uid (a retry proves nothing about the uid)', () => {
    const cache = new AnswerCache<string>(1024 * 1024);
    for (let i = 0; i < 4; i++) assert.equal(review(cache, reviewText(optedInPod(), 'u-1')), undefined);
  });

  it('never keeps a value for a uid token that a later duplicate key shadows', () => {
    const cache = new AnswerCache<string>(1024 * 1024);
    const text = (first: string, last: string): string =>
      reviewText(optedInPod(), last).replace(`"request":{"uid":"${last}"`, `"request":{"uid":"${first}","uid":"${last}"`);
    for (const [first, last] of [
      ['same', 'same'],
      ['other', 'same'],
      ['third', 'same'],
      ['fourth', 'same'],
    ] as const)
      assert.equal(review(cache, text(first, last)), undefined);
    assert.equal(cache.size.entries, 0, 'a first sighting takes no entry');
  });

  it('takes no entry for a pod seen once, so distinct pods never evict a kept answer', () => {
    const cache = new AnswerCache<string>(64 * 1024);
    const pod = (i: number) => optedInPod({ name: `web-${i}` });
    // Fills the budget with kept answers, then sends far more distinct pods than it could hold.
    for (let i = 0; i < 400; i++) for (let twice = 0; twice < 2; twice++) review(cache, reviewText(pod(i), randomUUID()));
    const kept = cache.size;
    const answered = (from: number, to: number): number =>
      Array.from({ length: to - from }, (_, i) => review(cache, reviewText(pod(from + i), randomUUID()))).filter((a) => a !== undefined).length;
    const before = answered(0, 400);
    for (let i = 0; i < 5000; i++) review(cache, reviewText(optedInPod({ name: `distinct-${i}` }), randomUUID()));
    assert.deepEqual(cache.size, kept, 'distinct pods changed what is kept');
    assert.equal(answered(0, 400), before, 'distinct pods evicted kept answers');
    assert.ok(before > 10, `${before} kept answers`);
  });

  it('keeps a pod seen again within the last first sightings, and runs one seen again after many others in full', () => {
    const cache = new AnswerCache<string>(1024 * 1024);
    const send = (name: string): string | undefined => review(cache, reviewText(optedInPod({ name }), randomUUID()));
    send('soon');
    for (let i = 0; i < 10; i++) send(`other-${i}`);
    send('soon');
    assert.notEqual(send('soon'), undefined, 'a pod seen again within 10 others was not kept');
    send('late');
    for (let i = 0; i < 1000; i++) send(`more-${i}`);
    send('late');
    assert.equal(send('late'), undefined, 'a first sighting 1000 pods ago was remembered');
    assert.notEqual(send('late'), undefined);
  });

  it('stays within its byte budget, least recently used out first', () => {
    const cache = new AnswerCache<string>(64 * 1024);
    const pod = (i: number) => optedInPod({ name: `web-${i}` });
    for (let i = 0; i < 400; i++) {
      for (let twice = 0; twice < 2; twice++) review(cache, reviewText(pod(i), randomUUID()));
      review(cache, reviewText(pod(0), randomUUID())); // pod 0 is used all the time
      assert.ok(cache.size.bytes <= 64 * 1024, `${cache.size.bytes} bytes held`);
    }
    assert.ok(cache.size.entries > 10 && cache.size.entries < 400, `${cache.size.entries} entries`);
    assert.notEqual(review(cache, reviewText(pod(0), randomUUID())), undefined, 'the entry in use survived');
    assert.equal(review(cache, reviewText(pod(1), randomUUID())), undefined, 'an old entry was evicted');
  });

  it('tells apart bodies that differ in one byte anywhere after the uid, each answered with its own value', () => {
    const cache = new AnswerCache<string>(4 * 1024 * 1024);
    const base = 'a'.repeat(40_000);
    const notes = [base, ...[0, 1, 2, 3, 2047, 2048, 16_383, 16_384, 39_998, 39_999].map((at) => base.slice(0, at) + 'b' + base.slice(at + 1))];
    const noteOf = (text: string): string =>
      String((JSON.parse(text) as { request: { object: { metadata: { annotations: { note: string } } } } }).request.object.metadata.annotations.note);
    for (let round = 0; round < 3; round++) {
      for (const note of notes) {
        const text = reviewText(optedInPod({ annotations: { note } }), randomUUID());
        const kept = review(cache, text, generation, () => noteOf(text));
        assert.equal(kept, round === 2 ? note : undefined, `round ${round}`);
      }
    }
    assert.equal(cache.size.entries, notes.length);
  });

  it('keeps nothing when its budget is 0, or for a value over an eighth of it', () => {
    const none = new AnswerCache<string>(0);
    const small = new AnswerCache<string>(512);
    for (let i = 0; i < 3; i++) {
      assert.equal(review(none, reviewText(optedInPod(), randomUUID())), undefined);
      assert.equal(review(small, reviewText(optedInPod(), randomUUID())), undefined);
    }
    assert.deepEqual([none.size.entries, small.size.entries], [0, 0]);
  });

  it('looks up only bodies in the apiserver encoding, with a plain uid', () => {
    const cache = new AnswerCache<string>(1024 * 1024);
    const r = podReview(optedInPod(), { uid: 'a' });
    const bodies = [
      JSON.stringify({ apiVersion: r.apiVersion, kind: r.kind, request: r.request }),
      JSON.stringify(r, null, 1),
      reviewText(optedInPod(), 'a\\u0041'),
      reviewText(optedInPod(), 'a-é'),
      reviewText(optedInPod(), 'x'.repeat(200)),
    ];
    for (const body of bodies) assert.equal(cache.slot(Buffer.from(body)), undefined, body.slice(0, 80));
    assert.notEqual(cache.slot(Buffer.from(reviewText(optedInPod(), 'a', { apiVersion: ReviewVersion.V1Beta1 }))), undefined);
  });

  it('starts empty for another generation, and keeps nothing without one', () => {
    const cache = new AnswerCache<string>(1024 * 1024);
    const text = (uid: string) => reviewText(optedInPod(), uid);
    for (const uid of ['u-1', 'u-2']) review(cache, text(uid));
    assert.notEqual(review(cache, text('u-3')), undefined);
    assert.equal(review(cache, text('u-4'), { ...generation }), undefined);
    // A generation that cannot be read (the pipeline's reader gives undefined): nothing kept, nothing given.
    const none = (): undefined => undefined;
    for (const uid of ['u-5', 'u-6', 'u-7']) assert.equal(review(cache, text(uid), none), undefined, uid);
  });

  it("keeps a namespace's answers while another namespace's generation changes, and drops them when its own does", () => {
    const cache = new AnswerCache<string>(1024 * 1024);
    const generations = new Map([
      ['quiet', { v: 1 }],
      ['busy', { v: 1 }],
    ]);
    const under = (namespace: string): unknown => generations.get(namespace);
    const text = (namespace: string, uid: string) => reviewText(optedInPod(), uid, { namespace });
    for (const ns of ['quiet', 'busy']) for (const uid of ['u-1', 'u-2']) review(cache, text(ns, uid), under);
    assert.notEqual(review(cache, text('quiet', 'u-3'), under), undefined);
    assert.notEqual(review(cache, text('busy', 'u-3'), under), undefined);
    for (let i = 2; i < 20; i++) generations.set('busy', { v: i }); // the busy namespace changes its templates, again and again
    assert.notEqual(review(cache, text('quiet', 'u-4'), under), undefined, "the quiet namespace's answer is still kept");
    assert.equal(review(cache, text('busy', 'u-4'), under), undefined, "the busy namespace's answer is computed again");
    generations.set('quiet', { v: 2 });
    assert.equal(review(cache, text('quiet', 'u-5'), under), undefined, 'and so is the quiet one once its own generation changes');
  });
});
