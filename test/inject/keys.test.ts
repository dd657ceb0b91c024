import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { editDistance, workloadKeyWarnings } from '../../src/inject/keys.js';

/** The whole Levenshtein table, as the textbook writes it. */
function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    previous = row;
  }
  return previous[b.length]!;
}

describe('editDistance', () => {
  it('is the Levenshtein distance when it is at most max, else max + 1', () => {
    const word = fc.string({ unit: fc.constantFrom('a', 'b', 'c', '-'), maxLength: 9 });
    fc.assert(fc.property(word, word, fc.integer({ min: 0, max: 4 }), (a, b, max) => editDistance(a, b, max) === Math.min(levenshtein(a, b), max + 1)), { numRuns: 3000 });
  });
});

describe('workloadKeyWarnings (issue 21)', () => {
  it('warns of the injector\'s keys on a workload\'s own metadata that its pod template lacks', () => {
    const workload = { labels: { 'sidecar-injector.io/inject': 'true', app: 'web' }, annotations: { 'sidecar-injector.io/templates': 'proxy', 'proxy.sidecar-injector.io/cpu': '1', 'deployment.kubernetes.io/revision': '3' } };
    assert.deepEqual(workloadKeyWarnings('Deployment', workload, { labels: { 'sidecar-injector.io/inject': 'true' } }), [
      'annotation "sidecar-injector.io/templates" is on the Deployment, not on its pod template (spec.template.metadata): its pods never get it',
      'annotation "proxy.sidecar-injector.io/cpu" is on the Deployment, not on its pod template (spec.template.metadata): its pods never get it',
    ]);
    assert.deepEqual(workloadKeyWarnings('Deployment', workload, { labels: workload.labels, annotations: workload.annotations }), [], 'none when the template has them too');
  });
});
