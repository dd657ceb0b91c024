import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isObject } from '../../src/kube/types.js';

describe('isObject', () => {
  it('holds for a JSON object, with or without a prototype, and for nothing else JSON can hold', () => {
    for (const value of [{}, { a: 1 }, Object.create(null)]) assert.equal(isObject(value), true, JSON.stringify(value));
    for (const value of [null, undefined, [], [{}], 'pod', 1, true]) assert.equal(isObject(value), false, JSON.stringify(value));
  });
});
