import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import jsonpatch from 'fast-json-patch';
import { escapeToken } from '../../src/patch/pointer.js';
import { diff } from '../../src/patch/diff.js';

/** Applies ops with fast-json-patch in validating mode: an add under a missing parent throws. */
function apply(doc: unknown, ops: unknown[]): unknown {
  return jsonpatch.applyPatch(structuredClone(doc), structuredClone(ops) as jsonpatch.Operation[], true, false).newDocument;
}

/** The product's patch generator (the mutating handler answers with its patch). */
describe("diff (the tests' reference patch)", () => {
  const cases: { name: string; before: any; after: any; ops: any[] }[] = [
    { name: 'no change gives no operation', before: { a: 1, b: [1, 2] }, after: { a: 1, b: [1, 2] }, ops: [] },
    {
      name: 'escapes / and ~ in keys (RFC 6901)',
      before: { metadata: { annotations: {} } },
      after: { metadata: { annotations: { 'example.com/a~b': 'x' } } },
      ops: [{ op: 'add', path: '/metadata/annotations/example.com~1a~0b', value: 'x' }],
    },
    {
      name: 'adds a missing map whole instead of a key under a missing parent',
      before: { metadata: { name: 'p' } },
      after: { metadata: { name: 'p', annotations: { 'a/b': 'c' } } },
      ops: [{ op: 'add', path: '/metadata/annotations', value: { 'a/b': 'c' } }],
    },
    {
      name: 'adds a missing list whole',
      before: { spec: { containers: [] } },
      after: { spec: { containers: [], volumes: [{ name: 'v', emptyDir: {} }] } },
      ops: [{ op: 'add', path: '/spec/volumes', value: [{ name: 'v', emptyDir: {} }] }],
    },
    {
      name: 'an insertion at the front of a named list is one add',
      before: {
        l: [
          { name: 'a', n: 1 },
          { name: 'b', n: 2 },
        ],
      },
      after: { l: [{ name: 'x' }, { name: 'a', n: 1 }, { name: 'b', n: 2 }] },
      ops: [{ op: 'add', path: '/l/0', value: { name: 'x' } }],
    },
    {
      name: 'insertions in the middle and at the end use the positions of the growing list',
      before: { l: [{ name: 'a' }, { name: 'b' }] },
      after: { l: [{ name: 'a' }, { name: 'x' }, { name: 'b' }, { name: 'y' }] },
      ops: [
        { op: 'add', path: '/l/1', value: { name: 'x' } },
        { op: 'add', path: '/l/3', value: { name: 'y' } },
      ],
    },
    {
      name: 'a changed named item is diffed field by field',
      before: { l: [{ name: 'a', env: [{ name: 'A', value: '1' }] }] },
      after: {
        l: [
          {
            name: 'a',
            env: [
              { name: 'A', value: '1' },
              { name: 'B', value: '2' },
            ],
          },
        ],
      },
      ops: [{ op: 'add', path: '/l/0/env/1', value: { name: 'B', value: '2' } }],
    },
    { name: 'a removed key is removed', before: { a: 1, b: 2 }, after: { a: 1 }, ops: [{ op: 'remove', path: '/b' }] },
    { name: 'a changed scalar is replaced', before: { a: 1 }, after: { a: 2 }, ops: [{ op: 'replace', path: '/a', value: 2 }] },
    {
      name: 'a reordered list is replaced whole',
      before: { l: [{ name: 'a' }, { name: 'b' }] },
      after: { l: [{ name: 'b' }, { name: 'a' }] },
      ops: [{ op: 'replace', path: '/l', value: [{ name: 'b' }, { name: 'a' }] }],
    },
    {
      name: 'a list that lost an item is replaced whole',
      before: { l: [1, 2, 3] },
      after: { l: [1, 3] },
      ops: [{ op: 'replace', path: '/l', value: [1, 3] }],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const ops = diff(c.before, c.after);
      assert.deepEqual(ops, c.ops);
      assert.deepEqual(apply(c.before, ops), c.after);
    });
  }

  it('never emits the untouched siblings of a change, so large integers are not re-serialized', () => {
    const big = JSON.parse('{"spec":{"containers":[{"name":"a","ports":[{"containerPort":8080}],"x":9007199254740993}]}}');
    const after = { spec: { ...big.spec, containers: [...big.spec.containers, { name: 'side', image: 'i' }] } };
    const ops = diff(big, after);
    assert.deepEqual(ops, [{ op: 'add', path: '/spec/containers/1', value: { name: 'side', image: 'i' } }]);
  });

  it('skips shared branches by identity without walking them', () => {
    const shared = { deep: { list: [{ name: 'x' }] } };
    let reads = 0;
    const watched = new Proxy(shared, { get: (t, k) => ((reads += 1), Reflect.get(t, k)) });
    const before = { a: watched, b: 1 };
    const after = { a: watched, b: 2 };
    assert.deepEqual(diff(before, after), [{ op: 'replace', path: '/b', value: 2 }]);
    assert.equal(reads, 0);
  });

  it('escapes tokens as RFC 6901 requires', () => {
    assert.equal(escapeToken('plain'), 'plain');
    assert.equal(escapeToken('a/b'), 'a~1b');
    assert.equal(escapeToken('~1'), '~01');
  });
});
