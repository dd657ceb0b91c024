import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { injectSidecars } from '../../src/inject/mutate.js';
import { selectTemplates } from '../../src/inject/policy.js';
import { createHandlers, validating } from '../../src/admission/handlers.js';
import { ReviewFault, ReviewPipeline, type ReviewHandler } from '../../src/admission/pipeline.js';
import { denied, passed } from '../../src/admission/verdict.js';
import { InjectorError } from '../../src/errors.js';
import type { TemplateHistory } from '../../src/templates/history.js';
import type { TemplateSet } from '../../src/templates/load.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { memoryAfterGc } from '../helpers/memory.js';
import { set, template } from '../helpers/templates.js';

const text = (pod: object, uid: string, apiVersion?: string): Buffer =>
  Buffer.from(JSON.stringify(podReview(pod, { uid, ...(apiVersion !== undefined && { apiVersion }) })));

/** A pipeline over one handler, with a fixed generation and room for answers. */
function pipeline(handle: ReviewHandler, generation: () => unknown = () => 'one generation'): ReviewPipeline {
  return new ReviewPipeline({ endpoint: '/mutate', handle, generation, answerCacheBytes: 1024 * 1024 });
}

describe('ReviewPipeline', () => {
  it('answers in the version the review came in, with the uid set once from the request, whatever the handler returns', () => {
    const seen: unknown[] = [];
    const p = pipeline((request) => {
      seen.push(request.operation);
      return passed('skipped', 'not-opted-in');
    });
    for (const apiVersion of ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']) {
      const answer = JSON.parse(p.review(text(optedInPod(), 'the-uid', apiVersion)).text);
      assert.deepEqual(answer, {
        apiVersion,
        kind: 'AdmissionReview',
        response: { uid: 'the-uid', allowed: true, auditAnnotations: { decision: 'skipped', reason: 'not-opted-in' } },
      });
    }
    assert.deepEqual(seen, ['CREATE', 'CREATE']);
  });

  it('gives the bytes JSON.stringify gives the whole AdmissionReview, uid first', () => {
    const verdict = denied(new InjectorError('TEMPLATE_UNKNOWN', ['"x"', 'a', 'b']), 'unknown-template');
    const uid = 'odd "uid" \\ é \u2028';
    const answer = pipeline(
      () => verdict,
      () => undefined,
    ).review(text(optedInPod(), uid)).text;
    assert.equal(answer, JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, ...verdict.response } }));
  });

  it('turns a 4xx error of the handler into a denial that names it, and records it', () => {
    const p = pipeline(() => {
      throw new InjectorError('POD_OVER_LIMIT', ['3 volumes', 2, 'max-volumes']);
    });
    const { text: answer, record } = p.review(text(optedInPod(), 'u-1'));
    const { response } = JSON.parse(answer);
    assert.equal(response.allowed, false);
    assert.equal(response.status.code, 400);
    assert.match(response.status.message, /3 volumes, over the limit of 2 \(--max-volumes\)/);
    assert.deepEqual([record.decision, record.reason, record.uid], ['denied', 'invalid-review', 'u-1']);
  });

  it('raises any other fault as a ReviewFault that carries the review, for an HTTP 500 with the uid', () => {
    const p = pipeline(() => {
      throw new TypeError('a bug');
    });
    assert.throws(
      () => p.review(text(optedInPod(), 'u-2', 'admission.k8s.io/v1beta1')),
      (err: unknown) =>
        err instanceof ReviewFault &&
        err.review.request.uid === 'u-2' &&
        err.review.apiVersion === 'admission.k8s.io/v1beta1' &&
        err.error.code === 'INTERNAL' &&
        /a bug/.test(err.error.message),
    );
  });

  it('refuses a body that is not a review before any handler runs', () => {
    let ran = 0;
    const p = pipeline(() => {
      ran++;
      return passed('skipped', 'not-opted-in');
    });
    assert.throws(
      () => p.review(Buffer.from('{not json')),
      (err: unknown) => err instanceof InjectorError && err.code === 'BODY_MALFORMED',
    );
    assert.throws(
      () => p.review(Buffer.from('{"kind":"Pod"}')),
      (err: unknown) => err instanceof InjectorError && err.code === 'REVIEW_INVALID',
    );
    assert.equal(ran, 0);
  });

  it('makes one record per review, with the facts of the request and whether the cache answered', () => {
    const p = pipeline(() => passed('skipped', 'not-opted-in'));
    const pod = { metadata: { generateName: 'web-', namespace: 'from-pod' }, spec: { containers: [] } };
    const records = ['a', 'b', 'c'].map((uid) => p.review(text(pod, uid)).record);
    assert.deepEqual(
      records.map((r) => [r.endpoint, r.uid, r.operation, r.namespace, r.pod, r.decision, r.cached]),
      [
        ['/mutate', 'a', 'CREATE', 'default', 'web-', 'skipped', false],
        ['/mutate', 'b', 'CREATE', 'default', 'web-', 'skipped', false],
        ['/mutate', 'c', 'CREATE', 'default', 'web-', 'skipped', true],
      ],
    );
    assert.ok(records.every((r) => r.durationMs >= 0));
  });

  it('keeps no review text alive with the answers it keeps: an entry holds a digest of the body, not its bytes', async () => {
    const p = new ReviewPipeline({
      endpoint: '/mutate',
      handle: () => passed('skipped', 'not-opted-in'),
      generation: () => 'one',
      answerCacheBytes: 64 * 1024 * 1024,
    });
    // Made in a function of its own, so no register of the test keeps a body.
    const keep = (i: number): void => {
      const pod = optedInPod({ annotations: { note: 'x'.repeat(1024 * 1024) + i } });
      for (const uid of ['a', 'b', 'c']) p.review(text(pod, uid));
    };
    const before = (await memoryAfterGc()).heapUsed;
    for (let i = 0; i < 10; i++) keep(i);
    const grown = (await memoryAfterGc()).heapUsed - before;
    assert.equal(p.cacheSize.entries, 10);
    // Each body's text was 1 MiB in the heap.
    assert.ok(grown < 1024 * 1024, `${(grown / 2 ** 20).toFixed(1)} MiB of heap held by 10 kept answers`);
  });

  it('answers the pods of one ReplicaSet from the third on without parsing or handling them, in the bytes a full run gives', () => {
    let ran = 0;
    const p = pipeline(() => {
      ran++;
      return passed('skipped', 'not-opted-in');
    });
    const parse = JSON.parse;
    let parsed = 0;
    JSON.parse = (...args: Parameters<typeof JSON.parse>) => (parsed++, parse(...args));
    let answers: string[];
    try {
      answers = ['a', 'b', 'c', 'd', 'e'].map((uid) => p.review(text(optedInPod(), uid)).text);
    } finally {
      JSON.parse = parse;
    }
    assert.deepEqual([parsed, ran], [2, 2]);
    const fresh = new ReviewPipeline({ endpoint: '/mutate', handle: () => passed('skipped', 'not-opted-in'), generation: () => 'one', answerCacheBytes: 0 });
    assert.deepEqual(
      answers,
      ['a', 'b', 'c', 'd', 'e'].map((uid) => fresh.review(text(optedInPod(), uid)).text),
    );
  });

  it('keeps answers per generation: another generation computes again', () => {
    let generation = 1;
    let ran = 0;
    const p = pipeline(
      () => {
        ran++;
        return passed('skipped', 'not-opted-in');
      },
      () => generation,
    );
    for (const uid of ['a', 'b', 'c', 'd']) p.review(text(optedInPod(), uid));
    assert.equal(ran, 2);
    generation = 2;
    assert.equal(p.review(text(optedInPod(), 'e')).record.cached, false);
    assert.equal(ran, 3);
  });
});

describe('the pipeline over the validating handler', () => {
  const shipper = (image: string): string => template('shipper', `  default: true\n  containers:\n    - name: shipper\n      image: ${image}\n`);
  const before = set(shipper('k8s.gcr.io/shipper:1'));
  const now = set(shipper('registry.k8s.io/shipper:1'));

  it('never answers from the cache a verdict that leans on the time since start: the window ends without a reload', () => {
    // A pod injected by the release before template versions: admitted by the names in its status
    // only within the window after start, which ends while the template set stays the same.
    const selection = selectTemplates(optedInPod(), before);
    assert.ok(selection.inject);
    const pod = structuredClone(injectSidecars(optedInPod(), selection.templates, 'default').pod) as any;
    pod.metadata.annotations['sidecar-injector.io/status'] = '{"templates":["shipper"],"digest":"7a58c114437aeb57"}';
    let inWindow = true;
    const history: TemplateHistory = {
      earlier: [],
      knows: () => false,
      get acceptsUnversioned() {
        return inWindow;
      },
      sawUnknownVersion: () => undefined,
    };
    const serving: TemplateSet = { ...now, history };
    const handlers = createHandlers({ templates: () => serving });
    const p = new ReviewPipeline({
      endpoint: '/validate',
      handle: handlers.byPath.get('/validate')!,
      generation: handlers.generation,
      answerCacheBytes: 1024 * 1024,
    });
    const decide = (uid: string) => {
      const { text: answer, record } = p.review(text(pod, uid));
      return [JSON.parse(answer).response.allowed, record.reason];
    };
    for (const uid of ['a', 'b', 'c', 'd']) assert.deepEqual(decide(uid), [true, 'unversioned-status']);
    inWindow = false;
    assert.deepEqual(decide('e'), [false, 'sidecars-missing']);
  });

  it('keeps the verdicts that depend on the request and the set alone', () => {
    let ran = 0;
    const validate = validating({ templates: () => now });
    const p = pipeline((request) => {
      ran++;
      return validate(request);
    });
    for (const uid of ['a', 'b', 'c', 'd']) assert.equal(JSON.parse(p.review(text(optedInPod(), uid)).text).response.allowed, false);
    assert.equal(ran, 2);
  });
});
