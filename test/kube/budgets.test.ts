import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HOME, eventually } from '../helpers/sidecartemplates.js';
import { startFakeApiServer } from '../helpers/fake-apiserver.js';
import { createKubeClients } from '../../src/kube/client.js';
import { openClusterTemplateStore } from '../../src/kube/sidecartemplates.js';
import { boundedObject, NAMESPACE_BUDGET_BYTES, OBJECT_OVERHEAD_BYTES } from '../../src/templates/cluster.js';
import { createLogger } from '../../src/log.js';

/** A SidecarTemplate of one container whose two env values hold `bytes` characters in all (the CRD takes 32 KiB a string). */
function sized(namespace: string, name: string, bytes: number, tag = '1'): any {
  const half = Math.floor(bytes / 2);
  const env = [
    { name: 'A', value: 'a'.repeat(half) },
    { name: 'B', value: 'b'.repeat(bytes - half) },
  ];
  return {
    apiVersion: 'sidecar-injector.io/v1alpha1',
    kind: 'SidecarTemplate',
    metadata: { name, namespace },
    spec: { containers: [{ name, image: `registry.example.com/${name}:${tag}`, env }] },
  };
}

/**
 * The namespace budget (4 MiB) through the API stand-in and the store as the server runs it: a
 * team's objects served as they are keep serving when one of its objects grows past the budget;
 * the grown version is refused in its status and its served version stays.
 */
describe('SidecarTemplate budgets through the API server', () => {
  it("a grown object past its namespace's budget falls back to its served version; the team's other objects stay served", async () => {
    const api = await startFakeApiServer();
    const big = 60_000;
    const weight = boundedObject(sized('team-a', 'x', big)).bytes + OBJECT_OVERHEAD_BYTES;
    // As many big objects as fit beside the small first one, and the small one grown to their size would not.
    const count = Math.floor((NAMESPACE_BUDGET_BYTES - boundedObject(sized('team-a', 'x', 100)).bytes - OBJECT_OVERHEAD_BYTES) / weight);
    assert.ok((count + 1) * weight > NAMESPACE_BUDGET_BYTES, 'the grown object does not fit beside the others');
    api.applyTemplate(sized('team-a', 'first', 100));
    for (let i = 0; i < count; i++) api.applyTemplate(sized('team-a', `big-${String(i).padStart(2, '0')}`, big));
    const logger = createLogger('silent');
    const store = openClusterTemplateStore(createKubeClients({ kubeconfig: api.kubeconfig, namespace: HOME }), { logger, retryMs: 50, debounceMs: 20 });
    const loaded = (name: string): any => api.template('team-a', name)?.status?.conditions?.[0];
    const servedNames = (): string[] =>
      [...(store.current().namespaces?.get('team-a')?.templates.values() ?? [])].filter((t) => t.namespace === 'team-a').map((t) => t.name);
    try {
      await eventually(async () => store.synced(), 'the first list');
      const names = ['first', ...Array.from({ length: count }, (_, i) => `big-${String(i).padStart(2, '0')}`)];
      await eventually(async () => names.every((n) => loaded(n)?.status === 'True'), 'every object served and its status written', 60_000);
      assert.equal(servedNames().length, count + 1);

      api.applyTemplate(sized('team-a', 'first', big, '2'));
      await eventually(async () => loaded('first')?.status === 'False', "the grown object's status says it is refused", 60_000);
      assert.match(
        loaded('first').message,
        /namespace team-a's objects ahead of this one \(those served as they are, then the older\) already hold \d+ of the 4194304 bytes/,
      );
      const first = store.current().namespaces?.get('team-a')?.templates.get('first');
      assert.equal(first?.spec.containers[0]?.image, 'registry.example.com/first:1', 'the version served before');
      assert.deepEqual(servedNames().sort(), [...names].sort(), 'every other object of the team still served');
      assert.ok(names.slice(1).every((n) => loaded(n)?.status === 'True'));
    } finally {
      await store.close();
      await api.close();
    }
  });

  it('two replicas keep and compile only the objects within the budget, the same ones, whatever order they saw them in', async () => {
    const api = await startFakeApiServer();
    const logger = createLogger('silent');
    const big = 60_000;
    const weight = boundedObject(sized('team-z', 'x', big)).bytes + OBJECT_OVERHEAD_BYTES;
    const fit = Math.floor(NAMESPACE_BUDGET_BYTES / weight);
    const total = fit + 20;
    // Created oldest first, named so that a list (in key order) returns the newest first. The 20
    // objects past the budget are invalid too: compiled, each would report its unknown field.
    const name = (i: number): string => `t-${String(total - i).padStart(3, '0')}`;
    const object = (i: number): any => {
      const o = sized('team-z', name(i), big);
      if (i >= fit) o.spec.containers[0].resoures = {};
      return o;
    };
    const compiled: string[][] = [[], []];
    const open = (n: number) =>
      openClusterTemplateStore(createKubeClients({ kubeconfig: api.kubeconfig, namespace: HOME }), {
        logger,
        retryMs: 50,
        debounceMs: 20,
        onReload: (r) => void (r.ok ? undefined : compiled[n]!.push(r.error ?? '')),
      });
    // Replica 0 watches while the objects are created (oldest first); replica 1 starts after, and lists them newest first.
    const first = open(0);
    let second: ReturnType<typeof open> | undefined;
    const loaded = (i: number): any => api.template('team-z', name(i))?.status?.conditions?.[0];
    const servedBy = (store: ReturnType<typeof open>): string[] =>
      [...(store.current().namespaces?.get('team-z')?.templates.values() ?? [])]
        .filter((t) => t.namespace === 'team-z')
        .map((t) => t.name)
        .sort();
    try {
      await eventually(async () => first.synced(), 'replica 0 listed');
      for (let i = 0; i < total; i++) api.applyTemplate(object(i));
      second = open(1);
      await eventually(async () => second!.synced(), 'replica 1 listed', 60_000);
      const within = Array.from({ length: fit }, (_, i) => name(i)).sort();
      await eventually(
        async () => JSON.stringify(servedBy(first)) === JSON.stringify(within) && JSON.stringify(servedBy(second!)) === JSON.stringify(within),
        'both replicas serve the oldest objects that fit',
        60_000,
      );
      await eventually(
        async () => Array.from({ length: total - fit }, (_, i) => loaded(fit + i)).every((c) => c?.status === 'False'),
        'the objects past the budget refused',
        60_000,
      );
      for (let i = fit; i < total; i++)
        assert.match(loaded(i).message, /namespace team-z's objects ahead of this one .* already hold \d+ of the 4194304 bytes/, name(i));
      assert.deepEqual(compiled, [[], []], 'no object past the budget was compiled by either replica');
    } finally {
      await first.close();
      await second?.close();
      await api.close();
    }
  });
});
