import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { imageRepository, parseImage, sameRepository } from '../../src/inject/image.js';

const SHA = 'sha256:' + 'a1'.repeat(32);

describe('parseImage', () => {
  it("reads every spelling of Docker Hub's library/busybox as docker.io/library/busybox:latest", () => {
    for (const ref of ['busybox', 'library/busybox', 'docker.io/busybox', 'docker.io/library/busybox', 'index.docker.io/library/busybox', 'index.docker.io/busybox']) {
      assert.deepEqual(parseImage(ref), { domain: 'docker.io', path: 'library/busybox', repository: 'docker.io/library/busybox', tag: 'latest' }, ref);
    }
  });

  // [reference, repository, tag, digest]: what the runtime pulls (distribution/reference normalize.go).
  const valid: readonly (readonly [string, string, string | undefined, string | undefined])[] = [
    ['busybox:1.36', 'docker.io/library/busybox', '1.36', undefined],
    ['index.docker.io/busybox:1.36', 'docker.io/library/busybox', '1.36', undefined],
    [`docker.io/busybox@${SHA}`, 'docker.io/library/busybox', undefined, SHA],
    [`busybox:1.36@${SHA}`, 'docker.io/library/busybox', '1.36', SHA],
    ['fluent/fluent-bit:3.1', 'docker.io/fluent/fluent-bit', '3.1', undefined],
    ['cr.fluentbit.io/fluent/fluent-bit:3.1', 'cr.fluentbit.io/fluent/fluent-bit', '3.1', undefined],
    ['k8s.gcr.io/pause:3.9', 'k8s.gcr.io/pause', '3.9', undefined],
    ['registry.k8s.io/pause:3.9', 'registry.k8s.io/pause', '3.9', undefined],
    ['localhost/x', 'localhost/x', 'latest', undefined],
    ['localhost:5000/x', 'localhost:5000/x', 'latest', undefined],
    ['localhost:5000/x:2', 'localhost:5000/x', '2', undefined],
    ['myreg:5000/team/x', 'myreg:5000/team/x', 'latest', undefined],
    [`myreg:5000/x:1@${SHA}`, 'myreg:5000/x', '1', SHA],
    ['[::1]:5000/x', '[::1]:5000/x', 'latest', undefined],
    ['localhost', 'docker.io/library/localhost', 'latest', undefined],
    ['Registry.Example.com/a/b', 'Registry.Example.com/a/b', 'latest', undefined],
    ['quay.io/a__b/c-d.e_f:v1.0-rc.1', 'quay.io/a__b/c-d.e_f', 'v1.0-rc.1', undefined],
  ];
  for (const [ref, repository, tag, digest] of valid) {
    it(`reads ${ref} as ${repository}${tag === undefined ? '' : ':' + tag}${digest === undefined ? '' : '@…'}`, () => {
      const parsed = parseImage(ref);
      assert.ok(!('problem' in parsed), JSON.stringify(parsed));
      assert.equal(parsed.repository, repository);
      assert.equal(parsed.tag, tag);
      assert.equal(parsed.digest, digest);
    });
  }

  const invalid: readonly (readonly [string, RegExp])[] = [
    ['', /empty/],
    ['Busybox', /lowercase/],
    ['docker.io/Library/busybox', /lowercase/],
    ['busybox:', /tag/],
    ['busybox:-x', /tag/],
    ['busybox@sha256:abc', /algorithm:hex/],
    [`busybox@md5:${'a'.repeat(32)}`, /not one a runtime verifies/],
    [`busybox@sha256:${'a'.repeat(63)}`, /64 hexadecimal digits/],
    ['a'.repeat(64), /image id/],
    [' busybox', /not valid/],
    ['busybox ', /tag|not valid/],
    ['my_reg:5000/x', /registry/],
    ['a//b', /not valid/],
    ['a/b-', /not valid/],
    ['x'.repeat(2000), /longer than/],
    [`${'a'.repeat(250)}/${'b'.repeat(10)}.c/d`, /longer than 255/],
  ];
  for (const [ref, problem] of invalid) {
    it(`refuses ${JSON.stringify(ref.length > 40 ? ref.slice(0, 20) + '…' : ref)} without throwing`, () => {
      const parsed = parseImage(ref);
      assert.ok('problem' in parsed, JSON.stringify(parsed));
      assert.match(parsed.problem, problem);
      assert.ok('problem' in parseImage(ref), ref);
    });
  }

  it('takes time linear in the input on inputs that make backtracking patterns explode', () => {
    // The separator [-]* of older ports of reference.go took minutes on 18 letters and a "!".
    const hostile = ['a'.repeat(900) + '!', 'a-'.repeat(450) + '!', 'a.'.repeat(450) + '/!', `${'a'.repeat(500)}/${'b'.repeat(400)}!`];
    const started = process.hrtime.bigint();
    for (const h of hostile) assert.ok('problem' in parseImage(h), h);
    // A generous bound: a catastrophic pattern takes seconds to hours here, the parser microseconds.
    assert.ok(Number(process.hrtime.bigint() - started) / 1e9 < 1);
  });
});

describe('sameRepository', () => {
  const same: readonly (readonly [string, string])[] = [
    ['busybox:1.36', `docker.io/busybox@${SHA}`],
    ['busybox', 'index.docker.io/library/busybox:latest'],
    ['library/busybox', 'docker.io/library/busybox'],
    ['fluent/fluent-bit:3.1', 'docker.io/fluent/fluent-bit:3.2'],
    ['localhost:5000/x', `localhost:5000/x@${SHA}`],
    ['NOT A REFERENCE', 'NOT A REFERENCE'],
  ];
  for (const [a, b] of same) it(`${a} and ${b} name one repository`, () => assert.equal(sameRepository(a, b), true));

  const different: readonly (readonly [string, string])[] = [
    ['fluent/fluent-bit:3.1', 'cr.fluentbit.io/fluent/fluent-bit:3.1'],
    ['k8s.gcr.io/pause', 'registry.k8s.io/pause'],
    ['localhost:5000/x', 'localhost:5001/x'],
    ['localhost:5000/x', 'localhost/x'],
    ['myreg:5000/x', 'docker.io/myreg/x'],
    ['busybox', 'Busybox'],
    ['busybox', 'busybox2'],
  ];
  for (const [a, b] of different) it(`${a} and ${b} are different repositories`, () => assert.equal(sameRepository(a, b), false));

  it('gives the text itself as the repository of an invalid reference', () => {
    assert.equal(imageRepository('Busybox'), 'Busybox');
  });
});
