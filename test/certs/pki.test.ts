import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { createCA, issueClientCert, issueServingCert, type KeyPair } from '../../src/certs/pki.js';

const DAY = 24 * 60 * 60 * 1000;

describe('pki', () => {
  let ca: KeyPair;
  before(async () => {
    ca = await createCA('pki-test-ca', 10);
  });

  it('makes a self-signed CA, valid for the days asked', () => {
    const cert = new X509Certificate(ca.certPem);
    assert.ok(cert.ca);
    assert.equal(cert.subject, 'CN=pki-test-ca');
    assert.ok(cert.verify(cert.publicKey), 'self-signed');
    const days = (Date.parse(cert.validTo) - Date.now()) / DAY;
    assert.ok(days > 9.9 && days <= 10, `${days} days`);
  });

  it('issues a serving certificate for the DNS names and IP addresses asked, signed by the CA, for server auth only', async () => {
    const pair = await issueServingCert(ca, { dnsNames: ['sidecar-injector.sidecar-injector.svc', 'sidecar-injector'], ipAddresses: ['127.0.0.1'] });
    const cert = new X509Certificate(pair.certPem);
    assert.ok(!cert.ca);
    assert.ok(cert.verify(new X509Certificate(ca.certPem).publicKey));
    assert.equal(cert.subject, 'CN=sidecar-injector.sidecar-injector.svc', 'the first DNS name, without a commonName');
    assert.equal(cert.subjectAltName, 'DNS:sidecar-injector.sidecar-injector.svc, DNS:sidecar-injector, IP Address:127.0.0.1');
    assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.1'], 'serverAuth');
    assert.ok(cert.checkPrivateKey(createPrivateKey(pair.keyPem)));
  });

  it('issues a client certificate for client auth only', async () => {
    const cert = new X509Certificate((await issueClientCert(ca, 'kube-apiserver')).certPem);
    assert.equal(cert.subject, 'CN=kube-apiserver');
    assert.ok(cert.verify(new X509Certificate(ca.certPem).publicKey));
    assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.2'], 'clientAuth');
  });
});
