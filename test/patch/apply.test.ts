import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InjectorError } from '../../src/errors.js';
import { applyJsonPatch, decodePatch, pointerOf, underPath, type Operation } from '../../src/patch/apply.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';

const pod = { metadata: { name: 'p', annotations: { a: '1' } }, spec: { containers: [{ name: 'app' }] } };

/** Operations the apiserver's evanphx/json-patch v4 applies or refuses; the strict v4 applier of the tests is the reference. */
const cases: [string, Operation[]][] = [
  ['an add of a new key', [{ op: 'add', path: '/metadata/labels', value: { x: 'y' } }]],
  ['an add of an escaped key', [{ op: 'add', path: '/metadata/annotations/example.com~1k', value: 'v' }]],
  ['an add at the end of a list', [{ op: 'add', path: '/spec/containers/1', value: { name: 'side' } }]],
  ['an add at the front of a list', [{ op: 'add', path: '/spec/containers/0', value: { name: 'side' } }]],
  ['a replace of a value', [{ op: 'replace', path: '/metadata/annotations/a', value: '2' }]],
  ['an add under a missing parent', [{ op: 'add', path: '/metadata/labels/x', value: 'y' }]],
  ['an add past the end of a list', [{ op: 'add', path: '/spec/containers/2', value: { name: 'side' } }]],
  ['an add into a list the pod lacks', [{ op: 'add', path: '/spec/initContainers/0', value: { name: 'side' } }]],
  ['a replace of a missing key', [{ op: 'replace', path: '/metadata/labels', value: {} }]],
  ['a remove of a missing key', [{ op: 'remove', path: '/metadata/labels' }]],
];

function outcome(apply: () => unknown): unknown {
  try {
    return apply();
  } catch {
    return 'refused';
  }
}

describe('applyJsonPatch', () => {
  for (const [title, ops] of cases) {
    it(`decides ${title} as the apiserver's json-patch v4 does`, () => {
      assert.deepEqual(
        outcome(() => applyJsonPatch(pod, ops)),
        outcome(() => applyPatchV4(pod, ops)),
      );
    });
  }

  it('leaves the operations alone when a later one adds into the value of an earlier one', () => {
    const ops: Operation[] = [
      { op: 'add', path: '/status', value: {} },
      { op: 'add', path: '/status/phase', value: 'Pending' },
    ];
    assert.deepEqual((applyJsonPatch(pod, ops) as { status?: unknown }).status, { phase: 'Pending' });
    assert.deepEqual(ops[0], { op: 'add', path: '/status', value: {} });
  });

  it('refuses an add under a missing parent with PATCH_NOT_APPLICABLE, naming the operation, and leaves the document alone', () => {
    const before = structuredClone(pod);
    assert.throws(
      () =>
        applyJsonPatch(pod, [
          { op: 'add', path: '/metadata/annotations/b', value: '2' },
          { op: 'add', path: '/status/phase', value: 'x' },
        ]),
      (err: unknown) => err instanceof InjectorError && err.code === 'PATCH_NOT_APPLICABLE' && /operation 1, add \/status\/phase/.test(err.message),
    );
    assert.deepEqual(pod, before);
  });
});

describe('decodePatch, pointerOf and underPath', () => {
  it("reads an AdmissionResponse's base64 patch, and none as no operations", () => {
    const ops = [{ op: 'add', path: '/a', value: 1 }];
    assert.deepEqual(decodePatch(Buffer.from(JSON.stringify(ops)).toString('base64')), ops);
    assert.deepEqual(decodePatch(undefined), []);
  });

  it('moves operations to where the pod sits in a document, escaping its keys', () => {
    assert.equal(pointerOf(['items', 0, 'spec', 'a/b~c']), '/items/0/spec/a~1b~0c');
    assert.deepEqual(underPath([{ op: 'add', path: '/metadata/x', value: 1 }], ['spec', 'template']), [
      { op: 'add', path: '/spec/template/metadata/x', value: 1 },
    ]);
    assert.deepEqual(underPath([{ op: 'remove', path: '/a' }], []), [{ op: 'remove', path: '/a' }]);
  });
});
