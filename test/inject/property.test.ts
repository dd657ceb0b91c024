import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InjectorError } from '../../src/errors.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { diff } from '../../src/patch/diff.js';
import { caseArb, loadSet, wire } from '../helpers/injection-cases.js';
import { applyPatchV4, PatchError } from '../helpers/jsonpatch-v4.js';
import { podProblems } from '../helpers/pod.js';

/**
 * Property-based proof of the injection engine over generated pods and templates: injection never
 * throws anything but a user error (TEMPLATE_CONFLICT, OVERRIDE_REFUSED, TEMPLATE_VOLUME_MISSING), the patch applies to the
 * pod it was made for under evanphx/json-patch v4 rules and yields exactly the injected pod, that pod
 * passes the core/v1 checks a wrong injection would trip, and injecting it again yields no patch.
 * The generator (test/helpers/injection-cases.ts) is shared with test/inject/mutate.model.test.ts.
 */

const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 400);

describe('injection over generated pods and templates', () => {
  it('never throws but a user error; the patch applies the v4 way and gives a valid pod; re-injection adds nothing', (t) => {
    const seen = { injected: 0, refused: 0 };
    fc.assert(
      fc.property(caseArb, ({ pod, templates, selected, namespace }) => {
        assert.deepEqual(podProblems(pod), [], 'the generator makes valid pods');
        const set = loadSet(templates);
        if (set === undefined) return void seen.refused++;
        const chosen = selected.map((n) => set.templates.get(n)!);
        const before = structuredClone(pod);
        let result;
        try {
          result = injectSidecars(pod, chosen, namespace);
        } catch (err) {
          if (
            err instanceof InjectorError &&
            (err.code === 'TEMPLATE_CONFLICT' ||
              err.code === 'OVERRIDE_REFUSED' ||
              err.code === 'TEMPLATE_VOLUME_MISSING' ||
              err.code === 'TEMPLATE_VALUE_INVALID')
          ) {
            seen.refused++;
            return;
          }
          throw err;
        }
        seen.injected++;
        assert.deepEqual(pod, before, 'injection is pure');
        const ops = wire(diff(pod, result.pod));
        const patched = applyPatchV4(pod, ops);
        assert.deepEqual(patched, wire(result.pod), 'the patch yields exactly the injected pod');
        assert.deepEqual(podProblems(patched), []);
        const again = injectSidecars(patched, chosen, namespace);
        assert.deepEqual(diff(patched, again.pod), [], 'injecting the result again yields no patch');
      }),
      { numRuns: RUNS },
    );
    // Guards against a generator that only ever produces conflicts: most cases must inject.
    t.diagnostic(`${RUNS} cases: ${seen.injected} injected, ${seen.refused} refused (template conflict, override or missing volume)`);
    assert.ok(seen.injected > RUNS / 2, `injected ${seen.injected}, refused ${seen.refused}`);
  });
});

describe('the strict v4 patch applier the property relies on', () => {
  const pod = { metadata: { name: 'p', labels: { a: 'b' } }, spec: { containers: [{ name: 'web' }] } };
  const fails = [
    ['an add under a missing parent', { op: 'add', path: '/metadata/annotations/x', value: 'y' }],
    ['an add under a null parent', { op: 'add', path: '/spec/nodeSelector/x', value: 'y' }],
    ['an index beyond the length', { op: 'add', path: '/spec/containers/2', value: {} }],
    ['a negative index', { op: 'add', path: '/spec/containers/-1', value: {} }],
    ['a replace of a missing key', { op: 'replace', path: '/metadata/namespace', value: 'x' }],
    ['a remove of a missing key', { op: 'remove', path: '/metadata/annotations' }],
    ['the root', { op: 'replace', path: '', value: {} }],
    ['an unknown op', { op: 'merge', path: '/metadata', value: {} }],
    ['an unescaped slash in a key', { op: 'add', path: '/metadata/labels/example.com/x', value: 'y' }],
  ] as const;
  for (const [name, op] of fails) {
    it(`refuses ${name}`, () => {
      assert.throws(() => applyPatchV4({ ...pod, spec: { ...pod.spec, nodeSelector: null } }, [op]), PatchError);
    });
  }

  it('decodes ~1 and ~0 in one pass, appends at the length and at "-"', () => {
    const out = applyPatchV4(pod, [
      { op: 'add', path: '/metadata/labels/example.com~1x', value: '1' },
      { op: 'add', path: '/metadata/labels/a~0b', value: '2' },
      { op: 'add', path: '/metadata/labels/~01', value: '3' },
      { op: 'add', path: '/spec/containers/1', value: { name: 'side' } },
      { op: 'add', path: '/spec/containers/-', value: { name: 'last' } },
      { op: 'add', path: '/spec/containers/0', value: { name: 'first' } },
    ]);
    assert.deepEqual(out.metadata.labels, { a: 'b', 'example.com/x': '1', 'a~b': '2', '~1': '3' });
    assert.deepEqual(
      out.spec.containers.map((c) => c.name),
      ['first', 'web', 'side', 'last'],
    );
    assert.deepEqual(pod.spec.containers, [{ name: 'web' }], 'the input is not modified');
  });
});
