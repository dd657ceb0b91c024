import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { podObject } from '../../src/admission/pod.js';

describe('podObject', () => {
  it('names a value of the wrong type by its type, never by walking it', () => {
    assert.throws(() => podObject({ kind: { toString: 'x' } }), /request.object has kind an object, not Pod/);
  });
});
