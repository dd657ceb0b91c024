import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { createCA, issueServingCert } from '../../src/certs/pki.js';
import { DefaultPolicy, reconcileCertificate, ROTATION_ANNOTATION, SecretKeys, serviceDnsNames, splitPem, type CertPolicy } from '../../src/certs/bootstrap.js';
import { createKubeClients } from '../../src/kube/client.js';
import { createSecretStore } from '../../src/kube/secret.js';
import { isPublished, publishCaBundle } from '../../src/kube/webhooks.js';
import { createLogger } from '../../src/log.js';
import { startFakeApiServer, webhookConfigObject, type FakeApiServer } from '../helpers/fake-apiserver.js';

const NS = 'sidecar-injector';
const NAME = 'sidecar-injector-tls';
const OVERLAP = 60_000;
const policy: CertPolicy = { ...DefaultPolicy, dnsNames: serviceDnsNames('sidecar-injector', NS), overlapMs: OVERLAP };
const logger = createLogger('silent');

describe('certificate bootstrap', () => {
  let api: FakeApiServer;
  /** Each call is one replica with its own client, as separate pods would be. */
  const replica = (now: () => number = Date.now) => {
    const clients = createKubeClients({ kubeconfig: api.kubeconfig, namespace: NS });
    return reconcileCertificate({
      store: createSecretStore(clients.core, NS, NAME),
      policy,
      publish: async (pem) => isPublished(await publishCaBundle(clients.admission, 'sidecar-injector', pem)),
      logger,
      now,
    });
  };
  const stored = () => {
    const s = api.secret(NS, NAME);
    return Object.fromEntries(Object.entries(s.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
  };
  const caBundleOf = (kind: 'mutating' | 'validating') =>
    Buffer.from(api.webhookConfig(kind, 'sidecar-injector').webhooks[0].clientConfig.caBundle ?? '', 'base64').toString();

  before(async () => {
    api = await startFakeApiServer();
  });
  after(() => api.close());
  beforeEach(async () => {
    await api.close();
    api = await startFakeApiServer();
    api.putWebhookConfig('mutating', webhookConfigObject('mutating', 'sidecar-injector'));
    api.putWebhookConfig('validating', webhookConfigObject('validating', 'sidecar-injector'));
  });

  it('first start creates the Secret, a CA and a serving certificate for the Service names, and publishes the CA', async () => {
    const state = await replica();
    const data = stored();
    assert.deepEqual(Object.keys(data).sort(), Object.values(SecretKeys).sort());
    const cert = new X509Certificate(state.serving.certPem);
    for (const name of serviceDnsNames('sidecar-injector', NS)) assert.ok(cert.checkHost(name), `certificate names ${name}`);
    assert.ok(cert.checkIssued(new X509Certificate(data[SecretKeys.caBundle]!)), 'signed by the CA in ca.crt');
    assert.ok(cert.validTo && new Date(cert.validTo).getTime() - Date.now() > 300 * 24 * 3600 * 1000, 'valid for a good while');
    assert.equal(caBundleOf('mutating'), data[SecretKeys.caBundle]);
    assert.equal(caBundleOf('validating'), data[SecretKeys.caBundle]);
    assert.equal(state.serving.certPem, data[SecretKeys.cert]);
  });

  it('a second replica serves the same certificate and writes nothing', async () => {
    const first = await replica();
    const writes = api.calls.filter((c) => c.method !== 'GET').length;
    const second = await replica();
    assert.equal(second.serving.certPem, first.serving.certPem);
    assert.equal(api.calls.filter((c) => c.method !== 'GET').length, writes);
  });

  it('replicas starting at once end with one Secret that all of them serve', async () => {
    api.latencyMs = 5;
    const states = await Promise.all(Array.from({ length: 5 }, () => replica()));
    const creates = api.calls.filter((c) => c.method === 'POST');
    assert.equal(creates.filter((c) => c.status === 201).length, 1, 'one create wins');
    assert.ok(
      creates.some((c) => c.status === 409),
      'the others lost the race with 409 and read again',
    );
    assert.equal(new Set(states.map((s) => s.serving.certPem)).size, 1);
    assert.equal(states[0]!.serving.certPem, stored()[SecretKeys.cert]);
  });

  it('renews a serving certificate near expiry with the same CA, and fixes a missing DNS name', async () => {
    const ca = await createCA('existing', 3650);
    const old = await issueServingCert(ca, { dnsNames: policy.dnsNames, validityDays: 0.001 });
    api.putSecret(NS, secretObject(ca.certPem, ca.keyPem, old.certPem, old.keyPem));
    const state = await replica();
    assert.notEqual(state.serving.certPem, old.certPem);
    assert.ok(new X509Certificate(state.serving.certPem).checkIssued(new X509Certificate(ca.certPem)), 'the CA is kept');
    assert.equal(stored()[SecretKeys.caBundle]!.trim(), ca.certPem.trim());

    const narrow = await issueServingCert(ca, { dnsNames: ['sidecar-injector'], validityDays: 365 });
    api.putSecret(NS, secretObject(ca.certPem, ca.keyPem, narrow.certPem, narrow.keyPem));
    const fixed = await replica();
    assert.ok(new X509Certificate(fixed.serving.certPem).checkHost(`sidecar-injector.${NS}.svc`));
  });

  it('renews with a stale view: the replica that loses the update race serves the winner', async () => {
    const ca = await createCA('existing', 3650);
    const old = await issueServingCert(ca, { dnsNames: policy.dnsNames, validityDays: 0.001 });
    api.putSecret(NS, secretObject(ca.certPem, ca.keyPem, old.certPem, old.keyPem));
    api.latencyMs = 5;
    const states = await Promise.all([replica(), replica(), replica()]);
    assert.ok(
      api.calls.some((c) => c.method === 'PUT' && c.status === 409),
      'a stale resourceVersion was refused',
    );
    assert.equal(api.calls.filter((c) => c.method === 'PUT' && c.status === 200).length, 1);
    assert.equal(new Set(states.map((s) => s.serving.certPem)).size, 1);
  });

  it('rotates a CA near expiry: both CAs are trusted before, and after, the serving certificate changes', async () => {
    const oldCa = await createCA('old-ca', 0.001); // ~86 s left of a ~6 min life: due for rotation
    const oldServing = await issueServingCert(oldCa, { dnsNames: policy.dnsNames, validityDays: 0.001 });
    api.putSecret(NS, secretObject(oldCa.certPem, oldCa.keyPem, oldServing.certPem, oldServing.keyPem));
    let clock = Date.now();
    const now = () => clock;

    // Phase 1: the new CA joins the bundle; the old certificate is still served.
    const p1 = await replica(now);
    assert.equal(p1.serving.certPem, oldServing.certPem);
    const bundle1 = splitPem(p1.caBundlePem);
    assert.equal(bundle1.length, 2);
    assert.equal(bundle1[1]!.trim(), oldCa.certPem.trim());
    assert.equal(caBundleOf('mutating'), p1.caBundlePem);
    assert.equal(caBundleOf('validating'), p1.caBundlePem);
    assert.ok(api.secret(NS, NAME).metadata.annotations[ROTATION_ANNOTATION]);

    // Within the overlap nothing moves, however often replicas check.
    clock += OVERLAP / 2;
    assert.equal((await replica(now)).serving.certPem, oldServing.certPem);

    // Phase 2: after the overlap, a certificate from the new CA, with both CAs still trusted.
    clock += OVERLAP;
    const p2 = await replica(now);
    const newCa = new X509Certificate(bundle1[0]!);
    assert.ok(new X509Certificate(p2.serving.certPem).checkIssued(newCa));
    assert.equal(splitPem(p2.caBundlePem).length, 2);
    assert.equal(caBundleOf('validating'), p2.caBundlePem);

    // Phase 3: after another overlap, the old CA is dropped.
    clock += OVERLAP + 1;
    const p3 = await replica(now);
    assert.equal(p3.serving.certPem, p2.serving.certPem);
    assert.deepEqual(
      splitPem(p3.caBundlePem).map((p) => p.trim()),
      [bundle1[0]!.trim()],
    );
    assert.equal(caBundleOf('mutating'), p3.caBundlePem);
    assert.equal(api.secret(NS, NAME).metadata.annotations?.[ROTATION_ANNOTATION], undefined);

    // The webhooks trusted: the old CA, then both, then the new one; never a CA without the one served.
    const history = api.bundleHistory.mutating.filter((b) => b !== '').map((b) => splitPem(Buffer.from(b, 'base64').toString()).map((p) => p.trim()));
    const [o, n] = [oldCa.certPem.trim(), bundle1[0]!.trim()];
    assert.deepEqual(history, [[o], [n, o], [n]]);
  });

  it('does not switch to the new CA while a webhook configuration is missing', async () => {
    const oldCa = await createCA('old-ca', 0.001);
    const oldServing = await issueServingCert(oldCa, { dnsNames: policy.dnsNames, validityDays: 365 });
    api.putSecret(NS, secretObject(oldCa.certPem, oldCa.keyPem, oldServing.certPem, oldServing.keyPem));
    const fresh = await startFakeApiServer(); // no webhook configurations at all
    try {
      fresh.putSecret(NS, secretObject(oldCa.certPem, oldCa.keyPem, oldServing.certPem, oldServing.keyPem));
      const clients = createKubeClients({ kubeconfig: fresh.kubeconfig, namespace: NS });
      const run = (now: number) =>
        reconcileCertificate({
          store: createSecretStore(clients.core, NS, NAME),
          policy,
          logger,
          now: () => now,
          publish: async (pem) => isPublished(await publishCaBundle(clients.admission, 'sidecar-injector', pem)),
        });
      await run(Date.now());
      const later = await run(Date.now() + 10 * OVERLAP);
      assert.equal(later.serving.certPem, oldServing.certPem, 'still the old certificate: nobody trusts the new CA yet');
    } finally {
      await fresh.close();
    }
  });
});

function secretObject(caPem: string, caKey: string, cert: string, key: string): any {
  const b = (s: string) => Buffer.from(s).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/tls',
    metadata: { name: NAME, namespace: NS },
    data: { 'ca.crt': b(caPem), 'ca.key': b(caKey), 'tls.crt': b(cert), 'tls.key': b(key) },
  };
}
