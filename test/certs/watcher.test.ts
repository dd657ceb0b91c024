import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { request, Agent } from 'node:https';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { serviceDnsNames } from '../../src/certs/bootstrap.js';
import { createCA, issueServingCert, type KeyPair } from '../../src/certs/pki.js';
import { watchCertificate, watchForChange } from '../../src/certs/watcher.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { createLogger } from '../../src/log.js';
import { serve } from '../../src/main.js';
import { httpsRequest } from '../helpers/client.js';
import { podReview, optedInPod } from '../helpers/review.js';
import { makeTestCerts } from '../helpers/tls.js';
import { startFakeApiServer, webhookConfigObject } from '../helpers/fake-apiserver.js';

const logger = createLogger('silent');

/** POSTs one review to /mutate at 127.0.0.1:port as `servername`; resolves status and the serial of the certificate the server showed. */
function review(port: number, ca: string | string[], opts: { servername?: string; agent?: Agent } = {}): Promise<{ status: number; serial: string }> {
  const body = JSON.stringify(podReview(optedInPod()));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate',
        method: 'POST',
        ca,
        servername: opts.servername ?? 'localhost',
        headers: { 'content-type': 'application/json' },
        agent: opts.agent ?? false,
      },
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
    const w = watchCertificate({
      initial: a,
      load: async () => {
        if (next instanceof Error) throw next;
        return next;
      },
      intervalMs: 3_600_000,
      onChange: (p) => swapped.push(p),
      logger,
    });
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
    const config = serveConfig(
      ['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', certs.certDir, '--templates-dir', 'templates', '--cert-check-interval', '1'],
      {},
    );
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
    // Traffic on both sides of the swap, counted rather than timed, so a busy machine cannot thin it out.
    const served = (pem: string): number => results.filter((r) => r.serial === serialOf(pem)).length;
    const until = async (pem: string): Promise<void> => {
      for (const deadline = Date.now() + 20_000; Date.now() < deadline && served(pem) < 20;) await new Promise((r) => setTimeout(r, 50));
    };
    await until(certs.serving.certPem);
    await writeFile(join(certs.certDir, 'tls.key'), next.keyPem);
    await writeFile(join(certs.certDir, 'tls.crt'), next.certPem);
    await until(next.certPem);
    stop = true;
    await Promise.all(workers);

    assert.deepEqual(failures, []);
    assert.ok(
      served(certs.serving.certPem) >= 20 && served(next.certPem) >= 20,
      `enough traffic: ${served(certs.serving.certPem)} reviews before the swap, ${served(next.certPem)} after`,
    );
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
    const config = serveConfig([...flags, '--cert-secret', 'sidecar-injector-tls', '--namespace', 'sidecar-injector', '--kubeconfig', api.kubeconfig], {});
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

/** The value of `sidecar_injector_certificate_reloads_total` for these labels on a running server. */
async function reloads(healthPort: number, certificate: string, result: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${healthPort}/metrics`);
  const line = (await res.text())
    .split('\n')
    .find((l) => l.startsWith(`sidecar_injector_certificate_reloads_total{certificate="${certificate}",result="${result}"}`));
  return Number(line?.split(' ')[1] ?? NaN);
}

/** Waits until the server has counted one more reload with this result: a check has seen what is on disk now. */
async function nextReload(healthPort: number, certificate: string, result: string): Promise<void> {
  const start = await reloads(healthPort, certificate, result);
  for (const deadline = Date.now() + 10_000; (await reloads(healthPort, certificate, result)) <= start; await new Promise((r) => setTimeout(r, 100))) {
    assert.ok(Date.now() < deadline, `no ${certificate} reload counted as ${result} within 10 s`);
  }
}

describe('certificate reload faults', () => {
  const rejections: unknown[] = [];
  const onRejection = (err: unknown): void => void rejections.push(err);
  process.on('unhandledRejection', onRejection);
  after(() => process.off('unhandledRejection', onRejection));

  it('keeps serving the current pair through an empty key, an empty certificate, a mismatched pair and an expired one, counts each, then swaps in a good pair', async () => {
    const certs = await makeTestCerts();
    const config = serveConfig(
      ['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', certs.certDir, '--templates-dir', 'templates', '--cert-check-interval', '1'],
      {},
    );
    const running = await serve(config, logger);
    after(() => running.close());
    const crt = join(certs.certDir, 'tls.crt');
    const key = join(certs.certDir, 'tls.key');
    const original = serialOf(certs.serving.certPem);
    const other = await issueServingCert(certs.ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    // notAfter a day ago (notBefore is five minutes ago): a certificate that has expired.
    const expired = await issueServingCert(certs.ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], validityDays: -1 });

    const broken: [string, string, string][] = [
      ['an empty tls.key', certs.serving.certPem, ''],
      ['an empty tls.crt', '', certs.serving.keyPem],
      ['half a tls.crt', certs.serving.certPem.slice(0, 200), certs.serving.keyPem],
      ["a key that is not the certificate's", other.certPem, certs.serving.keyPem],
      ['an expired certificate', expired.certPem, expired.keyPem],
    ];
    for (const [name, certPem, keyPem] of broken) {
      await writeFile(crt, certPem);
      await writeFile(key, keyPem);
      await nextReload(running.healthPort, 'serving', 'failure');
      const r = await review(running.port, certs.ca.certPem);
      assert.deepEqual(r, { status: 200, serial: original }, `after ${name}`);
    }
    assert.deepEqual(rejections, [], 'no path from the watcher ends in an unhandled rejection');
    assert.equal(await reloads(running.healthPort, 'serving', 'success'), 0);

    await writeFile(key, other.keyPem);
    await writeFile(crt, other.certPem);
    await nextReload(running.healthPort, 'serving', 'success');
    assert.deepEqual(await review(running.port, certs.ca.certPem), { status: 200, serial: serialOf(other.certPem) });
  });

  it('keeps the client CA through an empty file and an expired CA, counting each, then swaps in a good one', async () => {
    const certs = await makeTestCerts();
    const file = join(certs.certDir, 'client-ca.crt');
    const [first, second, expired] = [await createCA('client-ca-1', 1), await createCA('client-ca-2', 1), await createCA('client-ca-old', -1)];
    await writeFile(file, first.certPem);
    const flags = [
      '--port',
      '0',
      '--health-port',
      '0',
      '--host',
      '127.0.0.1',
      '--cert-dir',
      certs.certDir,
      '--templates-dir',
      'templates',
      '--cert-check-interval',
      '1',
      '--client-ca',
      file,
    ];
    const running = await serve(serveConfig(flags, {}), logger);
    after(() => running.close());
    const statusWith = async (ca: KeyPair): Promise<number | string> => {
      const { issueClientCert } = await import('../../src/certs/pki.js');
      const cert = await issueClientCert(ca, 'kube-apiserver');
      const agent = new Agent({ cert: cert.certPem, key: cert.keyPem, keepAlive: false });
      return httpsRequest(`https://127.0.0.1:${running.port}/mutate`, JSON.stringify(podReview(optedInPod())), { ca: certs.ca.certPem, agent }).then(
        (r) => r.status,
        (err: Error) => err.message,
      );
    };
    for (const pem of ['', expired.certPem]) {
      await writeFile(file, pem);
      await nextReload(running.healthPort, 'client-ca', 'failure');
      assert.equal(await statusWith(first), 200);
    }
    await writeFile(file, second.certPem);
    await nextReload(running.healthPort, 'client-ca', 'success');
    assert.equal(await statusWith(second), 200);
    assert.deepEqual(rejections, []);
  });

  it('survives a swap that throws: the current value stays, the failure is counted, nothing rejects', async () => {
    const results: boolean[] = [];
    const w = watchForChange({
      initial: 'a',
      load: async () => 'b',
      same: (x, y) => x === y,
      verify: () => {},
      onChange: () => {
        throw new Error('setSecureContext failed');
      },
      onResult: (swapped) => results.push(swapped),
      intervalMs: 3_600_000,
      logger,
      what: 'test value',
    });
    after(() => w.stop());
    assert.equal(await w.check(), false);
    assert.equal(w.current(), 'a');
    assert.deepEqual(results, [false]);
  });
});
