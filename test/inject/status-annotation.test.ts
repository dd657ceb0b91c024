import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { injectSidecars } from '../../src/inject/mutate.js';
import { readStatus, StatusFormat } from '../../src/inject/status-annotation.js';
import type { TemplateSet } from '../../src/templates/load.js';
import { optedInPod } from '../helpers/review.js';
import { set, template } from '../helpers/templates.js';

const shipper = (image: string): string =>
  template('shipper', `  default: true\n  containers:\n    - name: shipper\n      image: ${image}\n  volumes:\n    - name: logs\n      emptyDir: {}\n`);
const mesh = template('mesh', '  nativeSidecar: true\n  containers:\n    - name: proxy\n      image: envoyproxy/envoy:v1.31.0\n');

function injected(s: TemplateSet, annotations: Record<string, string> = {}): any {
  const pod = optedInPod({ annotations });
  return injectSidecars(
    pod,
    [...s.templates.values()].filter((t) => t.isDefault || (annotations['sidecar-injector.io/templates'] ?? '').includes(t.name)),
    'default',
  ).pod;
}

const withStatus = (value: string): any => optedInPod({ annotations: { 'sidecar-injector.io/status': value } });

describe('status annotation', () => {
  it('records per template its version, sidecars by list with normalized repositories, and volumes', () => {
    const s = set(shipper('busybox:1.36'), mesh);
    const pod = injected(s, { 'sidecar-injector.io/templates': 'shipper,mesh' });
    const read = readStatus(pod);
    assert.equal(read.format, StatusFormat.Versioned);
    assert.ok(read.format === StatusFormat.Versioned);
    assert.deepEqual(read.status, {
      templates: ['shipper', 'mesh'],
      injected: [
        { template: 'shipper', version: s.templates.get('shipper')!.version, containers: { shipper: 'docker.io/library/busybox' }, volumes: ['logs'] },
        { template: 'mesh', version: s.templates.get('mesh')!.version, initContainers: { proxy: 'docker.io/envoyproxy/envoy' } },
      ],
    });
  });

  it('gives a template the same version in every load of the same source, and another after any edit', () => {
    const v = (text: string): string => set(text).templates.get('shipper')!.version;
    assert.equal(v(shipper('busybox:1.36')), v(`# a comment\n${shipper('busybox:1.36')}`));
    assert.notEqual(v(shipper('busybox:1.36')), v(shipper('busybox:1.37')));
  });

  it("reads the earlier release's format as unversioned, and anything out of shape as invalid", () => {
    assert.deepEqual(readStatus(optedInPod()), { format: StatusFormat.None });
    assert.deepEqual(readStatus(withStatus('{"templates":["a"],"digest":"7a58c114437aeb57"}')), { format: StatusFormat.Unversioned, templates: ['a'] });
    for (const bad of [
      '',
      'nope',
      '[]',
      'null',
      '{"templates":"a"}',
      '{"templates":[1]}',
      '{"templates":[],"injected":{}}',
      '{"templates":[],"injected":[{"template":"a"}]}',
      '{"templates":[],"injected":[{"template":"a","version":"1","containers":{"c":1}}]}',
      '{"templates":[],"injected":[{"template":"a","version":"1","volumes":"v"}]}',
    ]) {
      assert.deepEqual(readStatus(withStatus(bad)), { format: StatusFormat.Invalid }, bad);
    }
  });

  it('reads a record whose container is named __proto__ as data', () => {
    const read = readStatus(withStatus('{"templates":["a"],"injected":[{"template":"a","version":"1","containers":{"__proto__":"x"}}]}'));
    assert.ok(read.format === StatusFormat.Versioned);
    assert.deepEqual(Object.keys(read.status.injected[0]!.containers!), ['__proto__']);
  });
});

describe('status annotation of a revision', () => {
  it('records the revision of the install that injected, none for the default install, even for the same frozen templates', () => {
    const s = set(shipper('busybox:1.36'));
    const templates = [...s.templates.values()];
    const status = (revision?: string) => readStatus(injectSidecars(optedInPod(), templates, 'default', revision === undefined ? {} : { revision }).pod);
    const canary = status('canary');
    assert.equal(canary.format, StatusFormat.Versioned);
    assert.equal(canary.format === StatusFormat.Versioned && canary.status.revision, 'canary');
    const plain = status();
    assert.ok(plain.format === StatusFormat.Versioned && !('revision' in plain.status), 'the default install writes no revision');
    // The plans are kept per rendering: another revision in the same process still gets its own.
    const other = status('b');
    assert.equal(other.format === StatusFormat.Versioned && other.status.revision, 'b');
  });

  it('reads a revision that is not a string as invalid', () => {
    const text = (revision: unknown) => JSON.stringify({ templates: ['shipper'], injected: [{ template: 'shipper', version: 'v' }], revision });
    assert.equal(readStatus(withStatus(text(7))).format, StatusFormat.Invalid);
    const read = readStatus(withStatus(text('canary')));
    assert.equal(read.format === StatusFormat.Versioned && read.status.revision, 'canary');
  });
});
