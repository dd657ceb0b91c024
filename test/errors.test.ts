import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCodes, InjectorError, TemplateSetError, asInjectorError, formatFault, injectorError, type ErrorCode } from '../src/errors.js';

const codes = Object.keys(ErrorCodes) as ErrorCode[];
const slots = (code: ErrorCode): number => ErrorCodes[code].message.split('%s').length - 1;

describe('the error table', () => {
  it('gives every code an HTTP status and a message', () => {
    for (const code of codes) {
      const { status, message } = ErrorCodes[code];
      assert.ok(Number.isInteger(status) && status >= 400 && status < 600, `${code}: ${status}`);
      assert.ok(message.length > 0, code);
    }
  });

  for (const code of codes) {
    it(`formats ${code} with each of its ${slots(code)} argument(s) in order`, () => {
      const args = Array.from({ length: slots(code) }, (_, i) => `<arg${i}>`);
      const err = new InjectorError(code, args);
      assert.equal(err.code, code);
      assert.equal(err.status, ErrorCodes[code].status);
      assert.equal(err.name, 'InjectorError');
      assert.ok(!err.message.includes('%s'), err.message);
      let at = -1;
      for (const a of args) {
        const next = err.message.indexOf(a);
        assert.ok(next > at, `${code}: ${a} in place in "${err.message}"`);
        at = next;
      }
      assert.equal(
        err.message,
        ErrorCodes[code].message.split('%s').reduce((out, part, i) => out + (i === 0 ? '' : args[i - 1]) + part, ''),
      );
    });
  }

  it('writes a missing argument as nothing, never "undefined"', () => {
    assert.equal(new InjectorError('TEMPLATE_CONFLICT').message, 'the selected templates conflict: ');
  });

  it('keeps the cause, and injectorError is the shorthand', () => {
    const cause = new Error('disk');
    assert.equal(new InjectorError('INTERNAL', ['x'], { cause }).cause, cause);
    assert.deepEqual(injectorError('METHOD_NOT_ALLOWED', 'GET', '/mutate', 'POST').message, 'method GET is not allowed on /mutate; use POST');
  });
});

describe('formatFault', () => {
  it('writes file:line:column: template "x": /path: message', () => {
    assert.equal(
      formatFault({ file: 't.yaml', template: 'x', path: '/spec/containers/0/image', message: 'must be a string', line: 9, column: 14 }),
      't.yaml:9:14: template "x": /spec/containers/0/image: must be a string',
    );
  });

  it('leaves out what it does not know: the position, the template, an empty path; a line without a column is column 1', () => {
    assert.equal(formatFault({ file: 't.yaml', path: '', message: 'YAML: bad' }), 't.yaml: YAML: bad');
    assert.equal(formatFault({ file: 't.yaml', path: '/spec', message: 'm', line: 3 }), 't.yaml:3:1: /spec: m');
  });

  it('lists every fault of a template set, one a line', () => {
    const err = new TemplateSetError([
      { file: 'a.yaml', path: '', message: 'one' },
      { file: 'b.yaml', path: '/x', message: 'two', line: 2, column: 5 },
    ]);
    assert.equal(err.code, 'TEMPLATE_INVALID');
    assert.equal(err.message, 'invalid sidecar templates:\n  a.yaml: one\n  b.yaml:2:5: /x: two');
  });
});

describe('asInjectorError', () => {
  it('keeps an InjectorError and turns anything else into INTERNAL, naming it, with it as the cause', () => {
    const known = injectorError('OVERLOADED');
    assert.equal(asInjectorError(known), known);
    const bug = new TypeError('x is undefined');
    const internal = asInjectorError(bug);
    assert.equal(internal.code, 'INTERNAL');
    assert.equal(internal.status, 500);
    assert.equal(internal.message, 'internal error while handling the review: x is undefined');
    assert.equal(internal.cause, bug);
    assert.equal(asInjectorError('oops').message, 'internal error while handling the review: oops');
  });
});
