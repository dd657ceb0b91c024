import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  IMAGE_MIRRORS_MAX,
  MIRROR_ENTRY_PATTERN,
  imageRepository,
  mirroredFrom,
  parseImage,
  parseImageMirrors,
  sameRepository,
  suggestedMirror,
  type ImageMirrors,
} from '../../src/kube-values/image.js';

const SHA = 'sha256:' + 'a1'.repeat(32);

describe('parseImage', () => {
  it("reads every spelling of Docker Hub's library/busybox as docker.io/library/busybox:latest", () => {
    for (const ref of [
      'busybox',
      'library/busybox',
      'docker.io/busybox',
      'docker.io/library/busybox',
      'index.docker.io/library/busybox',
      'index.docker.io/busybox',
    ]) {
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

/** The mirrors of these entries; the test fails if they do not parse. */
function mirrors(...entries: string[]): ImageMirrors {
  const parsed = parseImageMirrors(entries);
  assert.ok(!('problem' in parsed), JSON.stringify(parsed));
  return parsed;
}

describe('parseImageMirrors', () => {
  it('reads SOURCE=MIRROR entries, normalizing index.docker.io and dropping exact repeats', () => {
    assert.deepEqual(
      mirrors('docker.io=mirror.example.com/dockerhub', ' index.docker.io = mirror.example.com/dockerhub ', 'quay.io/prometheus=localhost:5000/prom').entries,
      [
        { source: 'docker.io', mirror: 'mirror.example.com/dockerhub' },
        { source: 'quay.io/prometheus', mirror: 'localhost:5000/prom' },
      ],
    );
  });

  // [entry, what the one-line message must say]
  const invalid: readonly (readonly [string, RegExp])[] = [
    ['docker.io', /"docker\.io" is not SOURCE=MIRROR/],
    ['=mirror.example.com', /the source is empty/],
    ['docker.io=', /the mirror is empty/],
    ['docker.io=mirror', /the mirror "mirror" does not begin with a registry host .*docker\.io\/mirror/],
    ['library/busybox=mirror.example.com', /the source "library\/busybox" does not begin with a registry host/],
    ['docker.io=mirror.example.com/Hub', /the mirror "Hub" is not a valid repository path/],
    ['docker.io/busybox:1.36=mirror.example.com', /has a tag/],
    [`docker.io/busybox@${SHA}=mirror.example.com`, /has a digest/],
    ['docker.io=mirror_example.com', /"mirror_example\.com" is not a valid registry host/],
    ['docker.io=index.docker.io', /maps docker\.io to itself/],
  ];
  for (const [entry, message] of invalid) {
    it(`refuses ${JSON.stringify(entry)}, saying why`, () => {
      const parsed = parseImageMirrors([entry]);
      assert.ok('problem' in parsed, JSON.stringify(parsed));
      assert.match(parsed.problem, message);
      assert.doesNotMatch(parsed.problem, /\n/);
    });
  }

  it(`refuses more than ${IMAGE_MIRRORS_MAX} entries`, () => {
    const parsed = parseImageMirrors(Array.from({ length: IMAGE_MIRRORS_MAX + 1 }, (_, i) => `r${i}.example.com=mirror.example.com/r${i}`));
    assert.ok('problem' in parsed);
  });
});

describe("MIRROR_ENTRY_PATTERN (the chart's check of imageMirrors, issue 21)", () => {
  it('accepts exactly the entries parseImageMirrors accepts, but those it leaves to the server', () => {
    const entries = [
      'docker.io=mirror.example.com/dockerhub',
      ' docker.io = mirror.example.com ',
      'index.docker.io=mirror.example.com',
      'localhost=mirror.example.com',
      'localhost:5000=registry.example.com:5443/cache',
      '[::1]:5000=mirror.example.com',
      'quay.io/prometheus=mirror.example.com/quay/prom',
      'Registry.Example.com=mirror.example.com',
      'a.b=c.d/e__f/g-h',
      'docker=mirror.example.com',
      'docker.io=mirror',
      'docker.io=mirror.example.com:tag/x',
      'docker.io=mirror.example.com/Upper',
      'docker.io',
      'docker.io=mirror.example.com@sha256:abc',
      '=mirror.example.com',
      'docker.io=',
      'docker.io=mirror.example.com/x:1',
      '-bad.io=mirror.example.com',
      'docker.io=mirror.example.com/a//b',
      'docker.io=mirror.example.com/',
      'a.io=b.io=c.io',
    ];
    const pattern = new RegExp(MIRROR_ENTRY_PATTERN);
    for (const entry of entries) assert.equal(pattern.test(entry), !('problem' in parseImageMirrors([entry])), entry);
    // Left to the server, as the pattern's comment says: a side over 255 characters, an entry that maps a prefix to itself.
    assert.ok(pattern.test('docker.io=docker.io') && 'problem' in parseImageMirrors(['docker.io=docker.io']));
  });
});

describe('mirroredFrom', () => {
  const hub = mirrors('docker.io=mirror.example.com/dockerhub');

  // [mirrors, template repository (normalized), image the pod runs]
  const matched: readonly (readonly [ImageMirrors, string, string])[] = [
    [hub, 'docker.io/fluent/fluent-bit', 'mirror.example.com/dockerhub/fluent/fluent-bit:3.2'],
    // busybox is docker.io/library/busybox: a mirror may keep library/ or drop it.
    [hub, 'docker.io/library/busybox', 'mirror.example.com/dockerhub/library/busybox:1.36'],
    [hub, 'docker.io/library/busybox', 'mirror.example.com/dockerhub/busybox:1.36'],
    [hub, 'docker.io/fluent/fluent-bit', `mirror.example.com/dockerhub/fluent/fluent-bit@${SHA}`],
    [hub, 'docker.io/fluent/fluent-bit', `mirror.example.com/dockerhub/fluent/fluent-bit:3.2@${SHA}`],
    [mirrors('index.docker.io=mirror.example.com'), 'docker.io/library/busybox', 'mirror.example.com/library/busybox'],
    [mirrors('docker.io/library=mirror.example.com/hub'), 'docker.io/library/busybox', 'mirror.example.com/hub/busybox'],
    [mirrors('localhost:5000=mirror.example.com:8443/local'), 'localhost:5000/team/x', 'mirror.example.com:8443/local/team/x:2'],
    [mirrors('myreg:5000/team=mirror.example.com'), 'myreg:5000/team/x', 'mirror.example.com/x'],
    [
      mirrors('quay.io=mirror.example.com/quay', 'docker.io=mirror.example.com/dockerhub'),
      'docker.io/fluent/fluent-bit',
      'mirror.example.com/dockerhub/fluent/fluent-bit',
    ],
    // One source, two regional mirrors.
    [mirrors('docker.io=eu.mirror.example.com', 'docker.io=us.mirror.example.com'), 'docker.io/fluent/fluent-bit', 'us.mirror.example.com/fluent/fluent-bit'],
    // A whole repository mapped.
    [mirrors('cr.fluentbit.io/fluent/fluent-bit=mirror.example.com/fluent-bit'), 'cr.fluentbit.io/fluent/fluent-bit', 'mirror.example.com/fluent-bit:3.2'],
  ];
  for (const [m, wanted, found] of matched) {
    it(`takes ${found} for ${wanted} under ${m.entries.map((e) => `${e.source}=${e.mirror}`).join(',')}`, () =>
      assert.notEqual(mirroredFrom(wanted, found, m), undefined));
  }

  const unmatched: readonly (readonly [ImageMirrors, string, string])[] = [
    // Component boundaries, on both sides.
    [hub, 'docker.iox/fluent/fluent-bit', 'mirror.example.com/dockerhub/fluent/fluent-bit'],
    [hub, 'docker.io/fluent/fluent-bit', 'mirror.example.com/dockerhubx/fluent/fluent-bit'],
    [mirrors('docker.io=mirror.example.com'), 'docker.io/fluent/fluent-bit', 'mirror.example.comx/fluent/fluent-bit'],
    [mirrors('docker.io/fluent=mirror.example.com/f'), 'docker.io/fluentd/fluent-bit', 'mirror.example.com/fd/fluent-bit'],
    [mirrors('docker.io=mirror.example.com'), 'docker.iox/fluent/fluent-bit', 'mirror.example.comx/fluent/fluent-bit'],
    // Ports are part of the host.
    [mirrors('docker.io=mirror.example.com'), 'docker.io/fluent/fluent-bit', 'mirror.example.com:5000/fluent/fluent-bit'],
    [mirrors('docker.io=mirror.example.com:5000'), 'docker.io/fluent/fluent-bit', 'mirror.example.com:50001/fluent/fluent-bit'],
    [mirrors('docker.io=mirror.example.com:5000'), 'docker.io/fluent/fluent-bit', 'mirror.example.com/fluent/fluent-bit'],
    // Another repository under the mirror is still another repository.
    [hub, 'docker.io/fluent/fluent-bit', 'mirror.example.com/dockerhub/fluent/fluentd'],
    [hub, 'docker.io/library/busybox', 'mirror.example.com/dockerhub/other/busybox'],
    // Only source to mirror: the template names the mirror, the pod runs the source.
    [hub, 'mirror.example.com/dockerhub/fluent/fluent-bit', 'docker.io/fluent/fluent-bit'],
    // No chains: a mirror of a mirror is not the source's.
    [mirrors('docker.io=a.example.com', 'a.example.com=b.example.com'), 'docker.io/fluent/fluent-bit', 'b.example.com/fluent/fluent-bit'],
    // The mirror's own root, and a reference the runtime refuses.
    [hub, 'docker.io/fluent/fluent-bit', 'mirror.example.com/dockerhub'],
    [hub, 'docker.io/fluent/fluent-bit', 'mirror.example.com/dockerhub/Fluent/fluent-bit'],
    [mirrors(), 'docker.io/fluent/fluent-bit', 'mirror.example.com/dockerhub/fluent/fluent-bit'],
  ];
  for (const [m, wanted, found] of unmatched) {
    it(`does not take ${found} for ${wanted} under ${m.entries.map((e) => `${e.source}=${e.mirror}`).join(',') || 'no mirrors'}`, () =>
      assert.equal(mirroredFrom(wanted, found, m), undefined));
  }
});

describe('suggestedMirror', () => {
  it("names the entry that maps the template's registry to the one the pod runs, and that entry admits it", () => {
    const cases: readonly (readonly [string, string, string])[] = [
      ['fluent/fluent-bit:3.2', 'mirror.example.com/dockerhub/fluent/fluent-bit:3.2', 'docker.io=mirror.example.com/dockerhub'],
      ['busybox', 'mirror.example.com/dockerhub/busybox', 'docker.io/library=mirror.example.com/dockerhub'],
      ['k8s.gcr.io/pause:3.9', 'registry.k8s.io/pause:3.9', 'k8s.gcr.io=registry.k8s.io'],
      // A policy that also pins the digest keeps the tag, or drops it for the digest.
      ['k8s.gcr.io/pause:3.9', `registry.k8s.io/pause:3.9@sha256:${'a'.repeat(64)}`, 'k8s.gcr.io=registry.k8s.io'],
      ['k8s.gcr.io/pause:3.9', `registry.k8s.io/pause@sha256:${'a'.repeat(64)}`, 'k8s.gcr.io=registry.k8s.io'],
    ];
    for (const [wanted, found, entry] of cases) {
      assert.equal(suggestedMirror(wanted, found), entry);
      assert.notEqual(mirroredFrom(imageRepository(wanted), found, mirrors(entry)), undefined, entry);
    }
  });

  it('suggests nothing for another image, the same registry, or an invalid reference', () => {
    assert.equal(suggestedMirror('docker.io/fluent/fluent-bit', 'mirror.example.com/fluent/fluentd'), undefined);
    assert.equal(suggestedMirror('docker.io/fluent/fluent-bit', 'docker.io/someone/fluent-bit'), undefined);
    assert.equal(suggestedMirror('docker.io/fluent/fluent-bit', 'Mirror/Fluent-Bit'), undefined);
  });

  it("suggests nothing for a container of the same name at another tag: the pod's own, not a mirrored sidecar", () => {
    // Bitnami's fluent-bit chart runs its own container "fluent-bit"; a mirror keeps the release.
    assert.equal(suggestedMirror('cr.fluentbit.io/fluent/fluent-bit:3.2.10', 'docker.io/bitnami/fluent-bit:4.0.8-debian-12-r0'), undefined);
    assert.equal(
      suggestedMirror('cr.fluentbit.io/fluent/fluent-bit:3.2.10', 'mirror.example.com/fluent/fluent-bit:3.2.10'),
      'cr.fluentbit.io=mirror.example.com',
    );
  });
});
