import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonOf, jsonString, jsonStringBody } from '../../src/patch/json.js';
import { deepFreeze } from '../../src/templates/template.js';

describe('jsonOf', () => {
  it('writes exactly what JSON.stringify writes, for every kind of value', () => {
    const sidecar = deepFreeze({ name: 'agent', image: 'a:1', env: [{ name: 'X', value: 'q"uote\\' }], ports: [{ containerPort: 1 }] });
    for (const value of [sidecar, 'v\u0000"x', [1, null, true, { y: 2.5 }], null, 7, [sidecar, { name: 'own' }]]) {
      assert.equal(jsonOf(value), JSON.stringify(value));
      assert.equal(jsonOf(value), JSON.stringify(value), 'the second time, from the kept JSON, the same');
    }
  });

  it('escapes strings as JSON.stringify does: quotes, backslashes, control characters, lone surrogates', () => {
    for (const key of ['a"b', 'a\\b', 'tab\there', 'nul\u0000', 'lone\ud800', 'pair\ud83d\ude00', 'del\u007f', 'plain']) {
      assert.equal(jsonString(key), JSON.stringify(key), JSON.stringify(key));
      assert.equal(jsonStringBody(key), JSON.stringify(key).slice(1, -1), JSON.stringify(key));
    }
  });

  it('writes new lists and maps holding frozen items, and long strings met twice, as JSON.stringify does', () => {
    const volume = deepFreeze({ name: 'logs', emptyDir: { sizeLimit: '1Gi' } });
    const status = `{"templates":["a"],"note":"${'x'.repeat(100)}\\n"}`;
    const values = [
      [volume, { name: 'own', configMap: { name: 'c', items: [{ key: 'k', path: 'p' }] } }],
      { 'sidecar-injector.io/status': status, 'q"k': 'v', n: 1.5, z: null, nested: { deep: [volume, { a: [1, 'two'] }] } },
      status,
      [[], {}, [volume]],
    ];
    for (const value of values) {
      assert.equal(jsonOf(value), JSON.stringify(value));
      assert.equal(jsonOf(value), JSON.stringify(value), 'the second time, from the kept JSON, the same');
    }
  });

  it('never reuses the JSON of an object that is not frozen', () => {
    const value = { name: 'a' };
    assert.equal(jsonOf([value]), JSON.stringify([value]));
    value.name = 'b';
    assert.equal(jsonOf([value]), '[{"name":"b"}]');
  });
});
