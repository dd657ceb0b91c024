import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkBody, describeValue, MAX_NESTING } from '../../src/admission/codec.js';
import { InjectorError } from '../../src/errors.js';

const limits = { objectKeys: 3, nodes: 10 };

function refusal(text: string): string | undefined {
  try {
    checkBody(text, limits);
    return undefined;
  } catch (err) {
    assert.ok(err instanceof InjectorError);
    assert.equal(err.code, 'REVIEW_INVALID');
    return err.message;
  }
}

describe('checkBody', () => {
  it('counts only the structure outside strings: brackets, colons and escaped quotes inside strings are text', () => {
    assert.equal(refusal(JSON.stringify({ a: '[[[[{{{{:::::', b: 'say \\"[[[[\\" :::', c: '\\\\' })), undefined);
    assert.equal(refusal(JSON.stringify({ a: '"[[[[[[[[[[[[[[' })), undefined);
  });

  it('counts the keys of each object apart, siblings and parents included', () => {
    assert.equal(refusal('{"a":{"x":1,"y":2,"z":3},"b":{"x":1,"y":2,"z":3},"c":3}'), undefined);
    assert.match(refusal('{"a":{"x":1,"y":2,"z":3},"b":1,"c":2,"d":3}') ?? '', /an object of more than 3 keys \(--max-object-keys\)/);
    assert.match(refusal('{"a":[{"x":1,"y":2,"z":3,"w":4}]}') ?? '', /more than 3 keys/);
  });

  it('counts every object and list, at any depth', () => {
    assert.equal(refusal(`[${Array(9).fill('[]').join(',')}]`), undefined);
    assert.match(refusal(`[${Array(10).fill('{}').join(',')}]`) ?? '', /more than 10 objects and lists \(--max-json-nodes\)/);
  });

  it(`refuses nesting past ${MAX_NESTING} levels, and allows it up to them`, () => {
    const nest = (n: number): string => '['.repeat(n) + ']'.repeat(n);
    assert.doesNotThrow(() => checkBody(nest(MAX_NESTING)));
    assert.throws(() => checkBody(nest(MAX_NESTING + 1)), /nested more than 64 levels/);
    assert.throws(() => checkBody(`{"a":"]]]]","b":${nest(MAX_NESTING + 1)}}`), /nested more than 64 levels/);
  });

  it('leaves malformed JSON to the parser', () => {
    assert.equal(refusal('{"unterminated'), undefined);
    assert.equal(refusal(']]]]'), undefined);
  });
});

describe('describeValue', () => {
  it('names an oversized value by its type or its first characters, never by walking it', () => {
    assert.equal(describeValue('x'.repeat(100)), JSON.stringify(`${'x'.repeat(64)}…`));
    assert.equal(describeValue({ toString: 'x' }), 'an object');
    assert.equal(describeValue([1]), 'a list');
  });
});
