import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeError, templatesDirError } from '../../src/cli/errors.js';
import { InjectorError } from '../../src/errors.js';

/** An error as node:net and node:fs make them. */
const systemError = (fields: Record<string, unknown>): Error => Object.assign(new Error(`${String(fields['code'])} from the system`), fields);

describe('describeError', () => {
  // [what failed, the error, the one line the CLI prints]
  const cases: [string, unknown, string | RegExp][] = [
    ['a product error', new InjectorError('USAGE', ['inject: -f FILE is required']), /inject: -f FILE is required/],
    [
      'a port in use',
      systemError({ code: 'EADDRINUSE', syscall: 'listen', address: '127.0.0.1', port: 8443 }),
      'cannot listen on 127.0.0.1:8443: the port is already in use; stop the process that holds it or choose another with --port or --health-port',
    ],
    [
      'an address not on this machine',
      systemError({ code: 'EADDRNOTAVAIL', syscall: 'listen', address: '10.9.9.9', port: 8443 }),
      'cannot listen on 10.9.9.9:8443: no such address on this machine; choose another with --host',
    ],
    [
      'a privileged port',
      systemError({ code: 'EACCES', syscall: 'listen', address: '0.0.0.0', port: 443 }),
      'cannot listen on 0.0.0.0:443: permission denied; ports below 1024 need privileges, choose a higher --port or --health-port',
    ],
    [
      'an unreadable file',
      systemError({ code: 'EACCES', syscall: 'open', path: '/etc/webhook/certs/tls.key' }),
      "/etc/webhook/certs/tls.key: permission denied; check the file's permissions",
    ],
    ['a missing file', systemError({ code: 'ENOENT', syscall: 'open', path: 'ca.crt' }), 'ca.crt: no such file or directory'],
    [
      'an unknown system error',
      systemError({ code: 'EIO' }),
      'internal error: EIO from the system; please report it (set SIDECAR_INJECTOR_DEBUG=1 for the stack)',
    ],
    ['a bug', new TypeError('x is undefined'), 'internal error: x is undefined; please report it (set SIDECAR_INJECTOR_DEBUG=1 for the stack)'],
    ['something thrown that is not an Error', 'oops', 'internal error: oops; please report it (set SIDECAR_INJECTOR_DEBUG=1 for the stack)'],
  ];
  for (const [name, err, want] of cases) {
    it(`says in one line what to do about ${name}`, () => {
      const line = describeError(err, {});
      if (typeof want === 'string') assert.equal(line, want);
      else assert.match(line, want);
      assert.doesNotMatch(line, /\n/);
    });
  }

  it('prints the stack of a bug only when SIDECAR_INJECTOR_DEBUG is set', () => {
    const bug = new TypeError('x is undefined');
    assert.match(describeError(bug, { SIDECAR_INJECTOR_DEBUG: '1' }), /^internal error: TypeError: x is undefined\n\s+at /);
    assert.doesNotMatch(describeError(bug, { SIDECAR_INJECTOR_DEBUG: '' }), /\n/);
  });
});

describe('templatesDirError', () => {
  it('turns the ENOENT of the templates directory itself into TEMPLATES_DIR_MISSING, naming the directory', () => {
    const err = templatesDirError(systemError({ code: 'ENOENT', syscall: 'scandir', path: './templates' }), './templates');
    assert.ok(err instanceof InjectorError && err.code === 'TEMPLATES_DIR_MISSING', String(err));
    assert.match(err.message, /templates directory "\.\/templates" does not exist; pass --templates-dir/);
  });

  it('leaves any other error as it is, a missing file inside the directory included', () => {
    const inside = systemError({ code: 'ENOENT', syscall: 'open', path: './templates/a.yaml' });
    const denied = systemError({ code: 'EACCES', syscall: 'scandir', path: './templates' });
    assert.equal(templatesDirError(inside, './templates'), inside);
    assert.equal(templatesDirError(denied, './templates'), denied);
    assert.equal(templatesDirError(null, './templates'), null);
  });
});
