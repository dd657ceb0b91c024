import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findConflicts } from '../../src/templates/conflicts.js';
import type { RenderedTemplate } from '../../src/templates/template.js';

/** A rendered template with only the parts a test gives. */
function rendered(name: string, parts: Partial<RenderedTemplate> = {}): RenderedTemplate {
  return { name, version: 'v', containers: [], nativeSidecar: false, initContainers: [], volumes: [], imagePullSecrets: [], volumeMounts: [], env: [], annotations: {}, labels: {}, ...parts };
}

const messages = (r: readonly RenderedTemplate[]): string[] => findConflicts(r).map((c) => c.message);

describe('findConflicts', () => {
  it('finds nothing in one template, even one that repeats itself', () => {
    const c = { name: 'a', image: 'a', ports: [{ containerPort: 80 }] };
    assert.deepEqual(findConflicts([rendered('a', { containers: [c, c] })]), []);
  });

  it('finds a container name used by two templates, across containers and init containers, with where it is', () => {
    const found = findConflicts([
      rendered('a', { containers: [{ name: 'proxy', image: 'a' }] }),
      rendered('b', { initContainers: [{ name: 'init', image: 'b' }, { name: 'proxy', image: 'a' }] }),
    ]);
    assert.deepEqual(found, [{ template: 'b', with: 'a', path: '/spec/initContainers/1/name', message: 'container "proxy" is defined by both template "a" and template "b"' }]);
  });

  it('finds a port number used by two templates (one network namespace), protocol TCP by default, but not a shared port name (Kubernetes only warns)', () => {
    assert.deepEqual(messages([
      rendered('a', { containers: [{ name: 'a', image: 'a', ports: [{ name: 'metrics', containerPort: 9090 }] }] }),
      rendered('b', { containers: [{ name: 'b', image: 'b', ports: [{ name: 'metrics', containerPort: 9091 }, { containerPort: 9090, protocol: 'TCP' }] }] }),
    ]), ['port 9090/TCP is defined by both template "a" and template "b"']);
  });

  it('lets two templates use one port number over different protocols', () => {
    assert.deepEqual(messages([
      rendered('a', { containers: [{ name: 'a', image: 'a', ports: [{ containerPort: 53 }] }] }),
      rendered('b', { containers: [{ name: 'b', image: 'b', ports: [{ containerPort: 53, protocol: 'UDP' }] }] }),
    ]), []);
  });

  it('shares a volume, an env var or a mount defined identically, and refuses one defined differently', () => {
    const same = { volumes: [{ name: 'cache', emptyDir: {} }], env: [{ name: 'MODE', value: 'x' }], volumeMounts: [{ name: 'cache', mountPath: '/cache' }] };
    assert.deepEqual(messages([rendered('a', same), rendered('b', same)]), []);
    assert.deepEqual(messages([
      rendered('a', same),
      rendered('b', { volumes: [{ name: 'cache', emptyDir: { medium: 'Memory' } }], env: [{ name: 'MODE', value: 'y' }], volumeMounts: [{ name: 'other', mountPath: '/cache' }] }),
    ]), [
      'volume "cache" is defined by both template "a" and template "b"',
      'env var "MODE" for the application containers is defined by both template "a" and template "b"',
      'mount path /cache in the application containers is defined by both template "a" and template "b"',
    ]);
    // Both ways: a later definition that says less (emptyDir without a medium) is still a different volume.
    assert.deepEqual(messages([rendered('a', { volumes: [{ name: 'cache', emptyDir: { medium: 'Memory' } }] }), rendered('b', { volumes: [{ name: 'cache', emptyDir: {} }] })]), ['volume "cache" is defined by both template "a" and template "b"']);
  });

  it('names the earliest template a later one clashes with, once per pair', () => {
    const proxy = { containers: [{ name: 'proxy', image: 'p' }] };
    assert.deepEqual(findConflicts([rendered('a', proxy), rendered('b', proxy), rendered('c', proxy)]).map((c) => [c.template, c.with]), [['b', 'a'], ['c', 'a']]);
  });
});
