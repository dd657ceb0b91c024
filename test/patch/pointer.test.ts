import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { escapeToken } from '../../src/patch/pointer.js';

/** RFC 6901 section 4: `~1` to `/` first, then `~0` to `~`. */
const unescape = (token: string): string => token.replace(/~1/g, '/').replace(/~0/g, '~');

describe('escapeToken', () => {
  it('leaves a token without ~ or / as it is', () => {
    assert.equal(escapeToken('containers'), 'containers');
    assert.equal(escapeToken(''), '');
  });

  it('writes / as ~1 and ~ as ~0 (an annotation key in a path)', () => {
    assert.equal(escapeToken('sidecar-injector.io/status'), 'sidecar-injector.io~1status');
    assert.equal(escapeToken('a~b'), 'a~0b');
  });

  it('escapes ~ before /, so a token holding "~1" is read back as written, not as "/"', () => {
    assert.equal(escapeToken('a~1b'), 'a~01b');
    assert.equal(escapeToken('~/'), '~0~1');
    for (const token of ['a~1b', '~/', '/~', '~~//', 'x/y~0z']) assert.equal(unescape(escapeToken(token)), token);
  });
});
