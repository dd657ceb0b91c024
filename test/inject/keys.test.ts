import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { strayKeyWarnings, workloadKeyWarnings } from '../../src/inject/keys.js';
import { editDistance } from '../../src/templates/edit-distance.js';

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
    fc.assert(
      fc.property(word, word, fc.integer({ min: 0, max: 4 }), (a, b, max) => editDistance(a, b, max) === Math.min(levenshtein(a, b), max + 1)),
      { numRuns: 3000 },
    );
  });
});

describe('workloadKeyWarnings (issue 21)', () => {
  it("warns of the injector's keys on a workload's own metadata that its pod template lacks", () => {
    const workload = {
      labels: { 'sidecar-injector.io/inject': 'true', app: 'web' },
      annotations: { 'sidecar-injector.io/templates': 'proxy', 'proxy.sidecar-injector.io/cpu': '1', 'deployment.kubernetes.io/revision': '3' },
    };
    assert.deepEqual(workloadKeyWarnings('Deployment', workload, { labels: { 'sidecar-injector.io/inject': 'true' } }), [
      'annotation "sidecar-injector.io/templates" is on the Deployment, not on its pod template (spec.template.metadata): its pods never get it',
      'annotation "proxy.sidecar-injector.io/cpu" is on the Deployment, not on its pod template (spec.template.metadata): its pods never get it',
    ]);
    assert.deepEqual(
      workloadKeyWarnings('Deployment', workload, { labels: workload.labels, annotations: workload.annotations }),
      [],
      'none when the template has them too',
    );
  });
});

describe('strayKeyWarnings: work per pod', () => {
  // A team's 500 templates named near one 60-character prefix, one of them adding 2800 annotations
  // under the prefix of a template that does not exist, and a pod that carries them all: every key
  // looks meant for the injector and is some template's own, and its template name is more than three
  // edits from each of theirs, which a comparison learns only at its end.
  const prefix = 'a'.repeat(56);
  const names = Array.from({ length: 500 }, (_, i) => `${prefix}-${i}`);
  const keys = Array.from({ length: 2800 }, (_, i) => `${prefix}-xyzw.sidecar-injector.io/k${i}`);
  const templates = new Map(names.map((name, i) => [name, { keys: new Set(i === 0 ? keys : []) }]));

  it('bounds the work of a pod of thousands of keys under a template prefix against hundreds of templates', () => {
    const annotations = Object.fromEntries(keys.map((k) => [k, 'v']));
    const start = performance.now();
    const warnings = strayKeyWarnings({ annotations }, { templates });
    const took = performance.now() - start;
    assert.deepEqual(warnings, ["the pod has more than 64 keys under the injector's prefixes; only the first 64 were checked"]);
    // The whole comparison of every key with every name took 8 s; what other teams' reviews may wait.
    assert.ok(took < 1000, `${took} ms`);
  });

  it('still names the stray keys among them, with the template meant', () => {
    const annotations = { [`${prefix}-7x.sidecar-injector.io/image`]: 'v', [keys[0]!]: 'v' };
    assert.deepEqual(strayKeyWarnings({ annotations }, { templates }), [
      `annotation "${`${prefix}-7x.sidecar-injector.io/image`.slice(0, 61)}..." is not read by the injector; did you mean "${`${prefix}-7.sidecar-injector.io/image`.slice(0, 61)}..."?`,
    ]);
  });
});
