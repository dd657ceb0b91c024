import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClients, KubeSource, SERVICE_ACCOUNT_DIR } from '../../src/kube/client.js';
import type { InjectorError } from '../../src/errors.js';
import { startFakeApiServer } from '../helpers/fake-apiserver.js';

describe('kube client', () => {
  it('uses the ServiceAccount token, CA and namespace inside a pod', async () => {
    const api = await startFakeApiServer();
    try {
      // Lay out the files the kubelet mounts, under a prefix, and the env it sets.
      const prefix = await mkdtemp(join(tmpdir(), 'sa-'));
      const dir = join(prefix, SERVICE_ACCOUNT_DIR);
      await mkdir(dir, { recursive: true });
      const caPem = Buffer.from(/certificate-authority-data: "([^"]+)"/.exec(await readFile(api.kubeconfig, 'utf8'))![1]!, 'base64');
      await writeFile(join(dir, 'ca.crt'), caPem);
      await writeFile(join(dir, 'token'), api.token);
      await writeFile(join(dir, 'namespace'), 'sidecar-injector');
      const port = new URL(api.url).port;
      const clients = createKubeClients({
        kubeconfig: '',
        namespace: '',
        env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port },
        serviceAccountPrefix: prefix,
      });
      assert.equal(clients.source, KubeSource.inCluster);
      assert.equal(clients.namespace, 'sidecar-injector');
      assert.equal(clients.server, `https://127.0.0.1:${port}`);
      await assert.rejects(clients.core.readNamespacedSecret({ name: 'none', namespace: 'sidecar-injector' }), (err: { code?: number }) => err.code === 404);
      assert.equal(api.calls.at(-1)?.status, 404, 'the call got past authentication with the mounted token');
    } finally {
      await api.close();
    }
  });

  it('uses a kubeconfig file and its context namespace when --namespace is empty', async () => {
    const api = await startFakeApiServer();
    try {
      const clients = createKubeClients({ kubeconfig: api.kubeconfig, namespace: '', env: {} });
      assert.equal(clients.source, KubeSource.kubeconfig);
      assert.equal(clients.namespace, 'default');
      assert.equal(createKubeClients({ kubeconfig: api.kubeconfig, namespace: 'other', env: {} }).namespace, 'other');
    } finally {
      await api.close();
    }
  });

  it('refuses a missing kubeconfig file with KUBE_CONFIG_INVALID', () => {
    assert.throws(
      () => createKubeClients({ kubeconfig: '/nonexistent/kubeconfig', namespace: '', env: {} }),
      (err: InjectorError) => err.code === 'KUBE_CONFIG_INVALID' && err.message.includes('/nonexistent/kubeconfig'),
    );
  });
});
