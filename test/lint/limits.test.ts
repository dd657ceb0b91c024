import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkBody } from '../../src/admission/codec.js';
import { podObject } from '../../src/admission/pod.js';
import { apiserverReview } from '../../src/kube/apiserver-review.js';
import { InjectorError } from '../../src/errors.js';
import type { Pod } from '../../src/kube/types.js';
import { countOf, excesses, Webhook, type Admitted, type Excess } from '../../src/lint/limits.js';

const pod = (containers: object[], metadata: object = {}): Pod => ({
  metadata: { generateName: 'web-', ...metadata },
  spec: { containers } as NonNullable<Pod['spec']>,
});
const admittedOf = (mutated: Pod, patch = '[]'): Admitted => ({
  patch,
  pod: mutated,
  review: apiserverReview({ kind: 'ReplicaSet', pod: pod([]), namespace: 'default' }, mutated),
});
const refusalOf = (step: () => unknown): string => {
  try {
    step();
  } catch (err) {
    if (err instanceof InjectorError) return err.message;
    throw err;
  }
  return assert.fail('not refused');
};
const summary = (found: readonly Excess[]): string[] => found.map((e) => `${e.webhook} ${e.limit?.flag ?? '-'} ${e.count ?? '-'}`);

/** Keys of every object in a JSON value: what --max-json-keys bounds, counted apart from the codec. */
function keysOf(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + keysOf(v), 0);
  if (value !== null && typeof value === 'object') return Object.values(value).reduce((n: number, v) => n + keysOf(v), Object.keys(value).length);
  return 0;
}

describe('excesses', () => {
  it('finds nothing in an injection within every limit', () => {
    assert.deepEqual(excesses(admittedOf(pod([{ name: 'app', image: 'app:1', env: [{ name: 'A', value: 'v' }] }]))), []);
  });

  it('counts a pod limit exactly, and gives the refusal the validating webhook answers', () => {
    const env = (n: number): object[] => Array.from({ length: n }, (_, i) => ({ name: `E${i}`, value: 'v' }));
    const mutated = pod([
      { name: 'app', image: 'app:1', env: env(10) },
      { name: 'proxy', image: 'proxy:1', env: env(1037) },
    ]);
    const found = excesses(admittedOf(mutated));
    assert.deepEqual(summary(found), ['validating max-env-per-container 1037']);
    assert.equal(found[0]!.limit!.limit, 1000);
    assert.equal(
      found[0]!.refusal,
      refusalOf(() => podObject(mutated)),
    );
  });

  it('reports every limit gone over, not only the first the server would meet', () => {
    const mounts = Array.from({ length: 1002 }, (_, i) => ({ name: `v${i}`, mountPath: `/m/${i}` }));
    const env = Array.from({ length: 1001 }, (_, i) => ({ name: `E${i}`, value: 'v' }));
    const found = excesses(admittedOf(pod([{ name: 'app', image: 'app:1', env, volumeMounts: mounts }])));
    assert.deepEqual(summary(found), ['validating max-env-per-container 1001', 'validating max-mounts-per-container 1002']);
  });

  it('counts a body limit on the review the validating webhook receives, as an independent count does', () => {
    // Env vars of 2 keys and 4 nodes each: past --max-json-keys before --max-json-nodes.
    const containers = (n: number): object[] =>
      Array.from({ length: n }, (_, c) => ({ name: `c${c}`, image: 'app:1', env: Array.from({ length: 900 }, (_, i) => ({ name: `E${i}`, value: 'v' })) }));
    const a = admittedOf(pod(containers(12)));
    const found = excesses(a);
    assert.deepEqual(summary(found), [`validating max-json-keys ${keysOf(JSON.parse(a.review))}`]);
    assert.ok(found[0]!.count! >= 12 * 900 * 2);
    assert.equal(
      found[0]!.refusal,
      refusalOf(() => checkBody(a.review)),
    );
    // Counted whether over the limit or not.
    const fewer = admittedOf(pod(containers(1)));
    assert.equal(countOf(fewer, found[0]!.limit!), keysOf(JSON.parse(fewer.review)));
  });

  it('measures the patch of the mutating answer in bytes of UTF-8', () => {
    const patch = JSON.stringify([{ op: 'add', path: '/metadata/annotations/x', value: '\u20ac'.repeat(400_000) }]);
    const found = excesses(admittedOf(pod([{ name: 'app', image: 'app:1' }]), patch));
    assert.deepEqual(summary(found), [`mutating max-patch-kib ${Buffer.byteLength(patch)}`]);
    assert.equal(found[0]!.webhook, Webhook.Mutating);
    assert.match(found[0]!.refusal, /^the patch that injects the sidecars would be \d+ bytes, over the limit of 1048576 \(--max-patch-kib\)$/);
  });

  it('reports a refusal no limit of serve lifts (a rule of Kubernetes) without a count', () => {
    const mutated = pod([{ name: 'app', image: 'app:1' }], { labels: { app: 'x'.repeat(64) } });
    assert.deepEqual(excesses(admittedOf(mutated)), [
      { webhook: Webhook.Validating, refusal: refusalOf(() => podObject(mutated)), code: 'POD_OVER_KUBERNETES_LIMIT' },
    ]);
  });
});
