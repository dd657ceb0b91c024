import assert from 'node:assert/strict';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createKubeClients, type KubeClients } from '../../src/kube/client.js';
import { listJobs, listLivePods, listNamespaces, listReplicaSets, PAGE_SIZE } from '../../src/kube/pods.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';

const pod = (namespace: string, name: string, phase: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace },
  spec: { containers: [{ name: 'app', image: 'busybox' }] },
  status: { phase },
});
const names = (items: { metadata?: { namespace?: string; name?: string } }[]): string[] => items.map((o) => `${o.metadata?.namespace}/${o.metadata?.name}`);

describe('listing what drift reads', () => {
  let api: FakeApiServer;
  let kube: KubeClients;
  before(async () => {
    api = await startFakeApiServer();
    kube = createKubeClients({ kubeconfig: api.kubeconfig, namespace: 'default' });
    for (const [ns, name, phase] of [
      ['shop', 'web', 'Running'],
      ['shop', 'starting', 'Pending'],
      ['shop', 'done', 'Succeeded'],
      ['shop', 'crashed', 'Failed'],
      ['billing', 'api', 'Running'],
    ] as const)
      api.putObject(pod(ns, name, phase));
    api.putObject({ apiVersion: 'apps/v1', kind: 'ReplicaSet', metadata: { name: 'web-5d4f', namespace: 'shop' }, spec: {} });
    api.putObject({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'nightly-1', namespace: 'billing' }, spec: {} });
  });
  after(() => api.close());

  it('lists the live pods (not Succeeded, not Failed) of one namespace or of all', async () => {
    assert.deepEqual(names(await listLivePods(kube, { namespace: 'shop' })), ['shop/starting', 'shop/web']);
    assert.deepEqual(names(await listLivePods(kube, { allNamespaces: true })), ['billing/api', 'shop/starting', 'shop/web']);
  });

  it('lists the ReplicaSets and Jobs in scope', async () => {
    assert.deepEqual(names(await listReplicaSets(kube, { namespace: 'shop' })), ['shop/web-5d4f']);
    assert.deepEqual(names(await listReplicaSets(kube, { namespace: 'billing' })), []);
    assert.deepEqual(names(await listJobs(kube, { allNamespaces: true })), ['billing/nightly-1']);
  });

  it("reads the namespaces' labels: the one namespace (get), or every one (list)", async () => {
    api.putObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'a' } } });
    api.putObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'billing' } });
    assert.deepEqual(
      (await listNamespaces(kube, { namespace: 'shop' })).map((n) => [n.metadata?.name, n.metadata?.labels]),
      [['shop', { team: 'a' }]],
    );
    assert.deepEqual(
      (await listNamespaces(kube, { allNamespaces: true })).map((n) => n.metadata?.name),
      ['billing', 'shop'],
    );
    await assert.rejects(listNamespaces(kube, { namespace: 'nope' }), /Kubernetes API call get namespace nope failed: HTTP 404: namespaces "nope" not found/);
  });

  it('reads every page of a long list, PAGE_SIZE objects a call', async () => {
    for (let i = 0; i <= PAGE_SIZE; i++) api.putObject(pod('bulk', `p-${String(i).padStart(4, '0')}`, 'Running'));
    const before = api.calls.length;
    assert.equal((await listLivePods(kube, { namespace: 'bulk' })).length, PAGE_SIZE + 1);
    assert.deepEqual(
      api.calls.slice(before).map((c) => c.path),
      ['/api/v1/namespaces/bulk/pods', '/api/v1/namespaces/bulk/pods'],
    );
  });

  it('names the call that failed', async () => {
    const kubeconfig = join(await mkdtemp(join(tmpdir(), 'pods-')), 'config');
    await writeFile(kubeconfig, (await readFile(api.kubeconfig, 'utf8')).replace(api.token, 'wrong-token'));
    const stranger = createKubeClients({ kubeconfig, namespace: 'default' });
    await assert.rejects(listJobs(stranger, { namespace: 'shop' }), /Kubernetes API call list jobs failed: HTTP 401/);
  });
});
