import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { podObject } from '../../src/admission/pod.js';

describe('podObject', () => {
  it('names a value of the wrong type by its type, never by walking it', () => {
    assert.throws(() => podObject({ kind: { toString: 'x' } }), /request.object has kind an object, not Pod/);
  });
});

describe("the annotations' size (ValidateAnnotationsSize: keys plus values, in UTF-8 bytes)", () => {
  const LIMIT = 256 * 1024;
  const key = 'example.com/blob';
  /** Annotations of exactly `total` bytes, in characters of `width` bytes (1: "x", 2: "é", 3: "€", 4: a pair for "😀"). */
  const of = (total: number, char: string, width: number): Record<string, string> => ({
    [key]: char.repeat(Math.floor((total - key.length) / width)) + 'x'.repeat((total - key.length) % width),
  });
  for (const [char, width] of [
    ['x', 1],
    ['é', 2],
    ['€', 3],
    ['😀', 4],
  ] as const) {
    it(`admits ${LIMIT} bytes and refuses one more, in characters of ${width} byte(s)`, () => {
      assert.doesNotThrow(() => podObject({ metadata: { annotations: of(LIMIT, char, width) } }));
      assert.throws(() => podObject({ metadata: { annotations: of(LIMIT + 1, char, width) } }), new RegExp(`the annotations take ${LIMIT + 1} bytes`));
    });
  }
});
