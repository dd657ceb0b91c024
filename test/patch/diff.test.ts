import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import jsonpatch from 'fast-json-patch';
import { diff, encodePatch, escapeToken } from '../../src/patch/diff.js';
import { deepFreeze } from '../../src/templates/template.js';

/** Applies ops with fast-json-patch in validating mode: an add under a missing parent throws. */
function apply(doc: unknown, ops: unknown[]): unknown {
  return jsonpatch.applyPatch(structuredClone(doc), structuredClone(ops) as jsonpatch.Operation[], true, false).newDocument;
}

describe('diff', () => {
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
      before: { l: [{ name: 'a', n: 1 }, { name: 'b', n: 2 }] },
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
      after: { l: [{ name: 'a', env: [{ name: 'A', value: '1' }, { name: 'B', value: '2' }] }] },
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

describe('encodePatch', () => {
  it('writes exactly what JSON.stringify writes, for every kind of operation and value', () => {
    const sidecar = deepFreeze({ name: 'agent', image: 'a:1', env: [{ name: 'X', value: 'q"uote\\' }], ports: [{ containerPort: 1 }] });
    const ops = [
      { op: 'add' as const, path: '/spec/containers/1', value: sidecar },
      { op: 'add' as const, path: '/metadata/annotations/a~1b', value: 'v\u0000"x' },
      { op: 'replace' as const, path: '/spec/x', value: [1, null, true, { y: 2.5 }] },
      { op: 'replace' as const, path: '/spec/n', value: null },
      { op: 'remove' as const, path: '/spec/gone' },
      { op: 'add' as const, path: '/spec/again', value: sidecar },
    ];
    assert.equal(encodePatch(ops), JSON.stringify(ops));
    assert.equal(encodePatch(ops), JSON.stringify(ops), 'the second encoding, from the kept JSON, is the same');
    assert.equal(encodePatch([]), '[]');
  });

  it('escapes a path as JSON.stringify does: quotes, backslashes, control characters, lone surrogates', () => {
    for (const key of ['a"b', 'a\\b', 'tab\there', 'nul\u0000', 'lone\ud800', 'pair\ud83d\ude00', 'del\u007f', 'plain']) {
      const ops = [{ op: 'add' as const, path: `/metadata/annotations/${key}`, value: 'v' }];
      assert.equal(encodePatch(ops), JSON.stringify(ops), JSON.stringify(key));
    }
  });

  it('writes new lists and maps holding frozen items, and long strings met twice, as JSON.stringify does', () => {
    const volume = deepFreeze({ name: 'logs', emptyDir: { sizeLimit: '1Gi' } });
    const status = `{"templates":["a"],"note":"${'x'.repeat(100)}\\n"}`;
    const ops = [
      { op: 'add' as const, path: '/spec/volumes', value: [volume, { name: 'own', configMap: { name: 'c', items: [{ key: 'k', path: 'p' }] } }] },
      { op: 'add' as const, path: '/metadata/annotations', value: { 'sidecar-injector.io/status': status, 'q"k': 'v', n: 1.5, z: null, nested: { deep: [volume, { a: [1, 'two'] }] } } },
      { op: 'add' as const, path: '/metadata/annotations/s', value: status },
      { op: 'replace' as const, path: '/spec/x', value: [[], {}, [volume]] },
    ];
    assert.equal(encodePatch(ops), JSON.stringify(ops));
    assert.equal(encodePatch(ops), JSON.stringify(ops), 'the second encoding, from the kept JSON, is the same');
  });

  it('escapes the paths of what diff just found as JSON.stringify does, keys with quotes and backslashes included', () => {
    const before = { metadata: { annotations: { a: '1' } }, spec: { 'x"y': { 'q\\r': [1] } } };
    const after = { metadata: { annotations: { a: '1', 'k"e\\y': '2', 'a/b~c': '3', 'ctl\u0001': '4' } }, spec: { 'x"y': { 'q\\r': [1, 2] } } };
    const ops = diff(before, after);
    assert.equal(ops.length, 4);
    assert.equal(encodePatch(ops), JSON.stringify(ops));
  });

  it('never reuses the JSON of an object that is not frozen', () => {
    const value = { name: 'a' };
    const op = { op: 'add' as const, path: '/x', value };
    assert.equal(encodePatch([op]), JSON.stringify([op]));
    value.name = 'b';
    assert.equal(encodePatch([op]), '[{"op":"add","path":"/x","value":{"name":"b"}}]');
  });
});
