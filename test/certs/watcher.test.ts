import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { request, Agent } from 'node:https';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { serviceDnsNames } from '../../src/certs/bootstrap.js';
import { createCA, issueServingCert, type KeyPair } from '../../src/certs/pki.js';
import { watchCertificate } from '../../src/certs/watcher.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { serve } from '../../src/main.js';
import { podReview, optedInPod } from '../helpers/review.js';
import { makeTestCerts } from '../helpers/tls.js';
import { startFakeApiServer, webhookConfigObject } from '../kube/fake-apiserver.js';

const logger = createLogger('silent');

/** POSTs one review to /mutate at 127.0.0.1:port as `servername`; resolves status and the serial of the certificate the server showed. */
function review(port: number, ca: string | string[], opts: { servername?: string; agent?: Agent } = {}): Promise<{ status: number; serial: string }> {
  const body = JSON.stringify(podReview(optedInPod()));
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/mutate', method: 'POST', ca, servername: opts.servername ?? 'localhost', headers: { 'content-type': 'application/json' }, agent: opts.agent ?? false },
      (res) => {
        const serial = (res.socket as TLSSocket).getPeerCertificate().serialNumber;
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, serial }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const serialOf = (pem: string): string => new X509Certificate(pem).serialNumber;

describe('certificate watcher', () => {
  it('swaps a changed pair and keeps the current one when the new pair is broken or the load fails', async () => {
    const ca = await createCA('t', 1);
    const a = await issueServingCert(ca, { dnsNames: ['localhost'] });
    const b = await issueServingCert(ca, { dnsNames: ['localhost'] });
    let next: KeyPair | Error = a;
    const swapped: KeyPair[] = [];
    const w = watchCertificate({ initial: a, load: async () => { if (next instanceof Error) throw next; return next; }, intervalMs: 3_600_000, onChange: (p) => swapped.push(p), logger });
    after(() => w.stop());
    assert.equal(await w.check(), false, 'same pair: nothing to do');
    next = { certPem: b.certPem, keyPem: a.keyPem }; // a Secret volume caught between tls.crt and tls.key
    assert.equal(await w.check(), false);
    next = new Error('API unreachable');
    assert.equal(await w.check(), false);
    next = b;
    assert.equal(await w.check(), true);
    assert.deepEqual(swapped, [b]);
    assert.equal(w.current(), b);
  });

  it('swaps the certificate of a running server under continuous requests without failing one', async () => {
    const certs = await makeTestCerts();
    const config = loadConfig(['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', certs.certDir, '--templates-dir', 'templates', '--cert-check-interval', '1'], {});
    const running = await serve(config, logger);
    after(() => running.close());
    const newCa = await createCA('rotated-ca', 1);
    const next = await issueServingCert(newCa, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    // The client trusts both CAs, as the webhooks do during a rotation.
    const trust = [certs.ca.certPem, newCa.certPem];
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 4 });
    after(() => keepAlive.destroy());

    const results: { status: number; serial: string }[] = [];
    const failures: unknown[] = [];
    let stop = false;
    const worker = async (agent?: Agent): Promise<void> => {
      while (!stop) {
        try {
          results.push(await review(running.port, trust, agent ? { agent } : {}));
        } catch (err) {
          failures.push(err);
        }
      }
    };
    const workers = [worker(), worker(), worker(keepAlive), worker(keepAlive)];
    await new Promise((r) => setTimeout(r, 200));
    await writeFile(join(certs.certDir, 'tls.key'), next.keyPem);
    await writeFile(join(certs.certDir, 'tls.crt'), next.certPem);
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !results.some((r) => r.serial === serialOf(next.certPem))) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 200));
    stop = true;
    await Promise.all(workers);

    assert.deepEqual(failures, []);
    assert.ok(results.length > 50, `enough traffic: ${results.length}`);
    assert.ok(results.every((r) => r.status === 200));
    const serials = new Set(results.map((r) => r.serial));
    assert.ok(serials.has(serialOf(certs.serving.certPem)) && serials.has(serialOf(next.certPem)), 'served the old, then the new certificate');
    assert.equal(running.certificateNotAfter().getTime(), new Date(new X509Certificate(next.certPem).validTo).getTime());
    assert.equal((await review(running.port, newCa.certPem)).serial, serialOf(next.certPem), 'a new connection gets the new certificate');
  });

  it('serves the Secret, publishes its CA, and swaps in a certificate another replica renewed', async () => {
    const api = await startFakeApiServer();
    after(() => api.close());
    api.putWebhookConfig('mutating', webhookConfigObject('mutating', 'sidecar-injector'));
    api.putWebhookConfig('validating', webhookConfigObject('validating', 'sidecar-injector'));
    const flags = ['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--templates-dir', 'templates', '--cert-check-interval', '1'];
    const config = loadConfig([...flags, '--cert-secret', 'sidecar-injector-tls', '--namespace', 'sidecar-injector', '--kubeconfig', api.kubeconfig], {});
    const running = await serve(config, logger);
    after(() => running.close());

    const secret = api.secret('sidecar-injector', 'sidecar-injector-tls');
    const ca = Buffer.from(secret.data['ca.crt'], 'base64').toString();
    assert.equal(api.webhookConfig('validating', 'sidecar-injector').webhooks[0].clientConfig.caBundle, secret.data['ca.crt']);
    const servername = 'sidecar-injector.sidecar-injector.svc';
    const first = await review(running.port, ca, { servername });
    assert.equal(first.status, 200);
    assert.equal(first.serial, serialOf(Buffer.from(secret.data['tls.crt'], 'base64').toString()));

    // Another replica renews the serving certificate with the same CA.
    const caKey = Buffer.from(secret.data['ca.key'], 'base64').toString();
    const renewed = await issueServingCert({ certPem: ca, keyPem: caKey }, { dnsNames: serviceDnsNames('sidecar-injector', 'sidecar-injector') });
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    api.putSecret('sidecar-injector', { ...secret, data: { ...secret.data, 'tls.crt': b64(renewed.certPem), 'tls.key': b64(renewed.keyPem) } });
    const deadline = Date.now() + 5000;
    let seen = first.serial;
    while (Date.now() < deadline && seen !== serialOf(renewed.certPem)) {
      await new Promise((r) => setTimeout(r, 100));
      seen = (await review(running.port, ca, { servername })).serial;
    }
    assert.equal(seen, serialOf(renewed.certPem));
  });
});
