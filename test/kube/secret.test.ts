import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { InjectorError } from '../../src/errors.js';
import { createKubeClients } from '../../src/kube/client.js';
import { createSecretStore, type SecretStore } from '../../src/kube/secret.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';

describe('secret store', () => {
  let api: FakeApiServer;
  let store: SecretStore;
  before(async () => {
    api = await startFakeApiServer();
    store = createSecretStore(createKubeClients({ kubeconfig: api.kubeconfig, namespace: 'injector' }).core, 'injector', 'tls');
  });
  after(() => api.close());

  it('reads a missing Secret as undefined', async () => {
    assert.equal(await store.read(), undefined);
  });

  it('creates a kubernetes.io/tls Secret with base64 data and reads it back decoded', async () => {
    const result = await store.create({ data: { 'tls.crt': 'CERT' }, annotations: { a: 'b' } });
    assert.equal(result.ok, true);
    const stored = api.secret('injector', 'tls');
    assert.equal(stored.type, 'kubernetes.io/tls');
    assert.equal(stored.data['tls.crt'], Buffer.from('CERT').toString('base64'));
    const read = await store.read();
    assert.deepEqual(read?.data, { 'tls.crt': 'CERT' });
    assert.deepEqual(read?.annotations, { a: 'b' });
  });

  it('reports a second create as a conflict (409 AlreadyExists)', async () => {
    const result = await store.create({ data: { 'tls.crt': 'OTHER' }, annotations: {} });
    assert.deepEqual(result, { ok: false, conflict: true });
    assert.equal(api.calls.at(-1)?.status, 409);
    assert.equal((await store.read())?.data['tls.crt'], 'CERT');
  });

  it('replaces against the version it read, and reports a stale version as a conflict', async () => {
    const first = (await store.read())!;
    const won = await store.replace(first, { data: { 'tls.crt': 'NEW' }, annotations: {} });
    assert.equal(won.ok, true);
    const lost = await store.replace(first, { data: { 'tls.crt': 'STALE' }, annotations: {} });
    assert.deepEqual(lost, { ok: false, conflict: true });
    assert.equal((await store.read())?.data['tls.crt'], 'NEW');
  });

  it('turns any other API failure into KUBE_API_FAILED naming the call and the status', async () => {
    const kubeconfig = join(dirname(api.kubeconfig), 'wrong-token');
    await writeFile(kubeconfig, (await readFile(api.kubeconfig, 'utf8')).replace(api.token, 'not-the-token'));
    const unauthorized = createSecretStore(createKubeClients({ kubeconfig, namespace: 'x' }).core, 'injector', 'tls');
    await assert.rejects(
      unauthorized.read(),
      (err: InjectorError) => err.code === 'KUBE_API_FAILED' && /GET secrets\/injector\/tls/.test(err.message) && /HTTP 401/.test(err.message),
    );
  });
});
