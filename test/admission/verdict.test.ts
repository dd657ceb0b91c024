import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { base64Patch } from '../../src/admission/codec.js';
import { boundedWarnings, injected, passed } from '../../src/admission/verdict.js';

// The apiserver passes on 4096 characters of warnings and cuts each to 256 once over
// (k8s.io/apiserver pkg/endpoints/filters/warning.go): an answer stays well below both.
const total = (warnings: readonly string[]): number => warnings.reduce((n, w) => n + w.length, 0);

describe('warnings of an answer', () => {
  it('leaves a few short warnings as they are, the same list', () => {
    const warnings = ['container "a" of template "t" already exists in the pod and differs; the pod\'s definition was kept'];
    assert.equal(boundedWarnings(warnings), warnings);
  });

  it('cuts one long warning to a few hundred characters', () => {
    const [one, ...rest] = boundedWarnings([`annotation x names ${'"n", '.repeat(60_000)}`]);
    assert.equal(rest.length, 0);
    assert.equal(one!.length, 240);
    assert.ok(one!.endsWith('...'));
  });

  it('keeps at most 2048 characters in all, then counts the rest', () => {
    const many = Array.from({ length: 100 }, (_, i) => `warning ${i} ${'x'.repeat(100)}`);
    const out = boundedWarnings(many);
    assert.ok(total(out) <= 2048, String(total(out)));
    assert.deepEqual(out.slice(0, -1), many.slice(0, out.length - 1));
    assert.equal(out.at(-1), `${many.length - out.length + 1} more warnings not shown`);
  });

  it('bounds what the handlers answer', () => {
    const long = ['y'.repeat(300_000)];
    for (const v of [passed('skipped', 'not-opted-in', long), injected('injected', ['t'], 1, base64Patch('{}'), long)]) {
      assert.ok(total(v.response.warnings ?? []) <= 2048);
    }
  });
});
