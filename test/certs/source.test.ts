import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createCA, issueServingCert, type KeyPair } from '../../src/certs/pki.js';
import { makeSelfSigned, readCertDir, readClientCa, verifyClientCa, verifyServingPair } from '../../src/certs/source.js';
import { InjectorError } from '../../src/errors.js';

/** True for CERT_INVALID whose message matches `why`. */
const certInvalid =
  (why: RegExp) =>
  (err: unknown): boolean =>
    err instanceof InjectorError && err.code === 'CERT_INVALID' && why.test(err.message);

describe('certificate sources', () => {
  let ca: KeyPair;
  let serving: KeyPair;
  let dir: string;
  before(async () => {
    ca = await createCA('source-test-ca', 1);
    serving = await issueServingCert(ca, { dnsNames: ['localhost'], validityDays: 1 });
    dir = await mkdtemp(join(tmpdir(), 'certs-source-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  describe('verifyServingPair', () => {
    it('accepts a certificate with its own key', () => {
      assert.doesNotThrow(() => verifyServingPair(serving));
    });

    it('refuses, saying why and where, what cannot serve', async () => {
      const other = await issueServingCert(ca, { dnsNames: ['localhost'] });
      // notAfter a day ago (notBefore is five minutes ago): a certificate that has expired.
      const expired = await issueServingCert(ca, { dnsNames: ['localhost'], validityDays: -1 });
      const broken: [string, KeyPair, RegExp][] = [
        ['an empty certificate', { certPem: '', keyPem: serving.keyPem }, /tls\.crt holds no certificate/],
        ['half a certificate', { certPem: serving.certPem.slice(0, 200), keyPem: serving.keyPem }, /tls\.crt holds no certificate/],
        ['an empty key', { certPem: serving.certPem, keyPem: '' }, /tls\.key holds no private key/],
        ["another certificate's key", { certPem: other.certPem, keyPem: serving.keyPem }, /tls\.key is not the key of the certificate in tls\.crt/],
        ['an expired certificate', expired, /the certificate expired at /],
      ];
      for (const [name, pair, why] of broken) {
        assert.throws(() => verifyServingPair(pair, '/etc/webhook/certs'), certInvalid(new RegExp(`/etc/webhook/certs: ${why.source}`)), name);
      }
    });

    it('judges expiry at the time it is given', () => {
      const notAfter = new Date(new X509Certificate(serving.certPem).validTo);
      assert.throws(() => verifyServingPair(serving, '', new Date(notAfter.getTime() + 1000)), certInvalid(/expired/));
    });
  });

  describe('readCertDir', () => {
    it('reads tls.crt and tls.key, as a kubernetes.io/tls Secret is mounted', async () => {
      await writeFile(join(dir, 'tls.crt'), serving.certPem);
      await writeFile(join(dir, 'tls.key'), serving.keyPem);
      assert.deepEqual(await readCertDir(dir), serving);
    });

    it('names the directory when a file is missing', async () => {
      const empty = await mkdtemp(join(dir, 'empty-'));
      await assert.rejects(readCertDir(empty), certInvalid(new RegExp(`${empty}: ENOENT`)));
    });
  });

  describe('makeSelfSigned', () => {
    it('writes the CA for clients and returns a pair for localhost that chains to it', async () => {
      const local = join(dir, 'self-signed');
      const pair = await makeSelfSigned(local);
      assert.equal(pair.caFile, join(local, 'ca.crt'));
      const caCert = new X509Certificate(await readFile(pair.caFile, 'utf8'));
      const cert = new X509Certificate(pair.certPem);
      assert.ok(caCert.ca);
      assert.ok(cert.verify(caCert.publicKey), 'signed by the CA written to ca.crt');
      assert.ok(cert.checkHost('localhost') !== undefined && cert.checkIP('127.0.0.1') !== undefined && cert.checkIP('::1') !== undefined, cert.subjectAltName);
      assert.doesNotThrow(() => verifyServingPair(pair));
      assert.equal(pair.reused, false);
      assert.equal((await stat(join(local, 'tls.key'))).mode & 0o777, 0o600, 'the key is readable by its owner only');
    });

    it('serves again the pair a running server serves, never replacing the CA its clients trust (issue 21)', async () => {
      const local = join(dir, 'second-start');
      const first = await makeSelfSigned(local);
      const caPem = await readFile(first.caFile, 'utf8');
      const second = await makeSelfSigned(local);
      assert.deepEqual([second.reused, second.certPem, second.keyPem], [true, first.certPem, first.keyPem]);
      assert.equal(await readFile(second.caFile, 'utf8'), caPem);
    });

    it('makes a new pair when the kept one has less than a day left, or does not chain to ca.crt', async () => {
      const local = join(dir, 'renewed');
      const first = await makeSelfSigned(local);
      const nearEnd = new Date(Date.parse(new X509Certificate(first.certPem).validTo) - 60 * 60 * 1000);
      const renewed = await makeSelfSigned(local, nearEnd);
      assert.equal(renewed.reused, false);
      assert.notEqual(renewed.certPem, first.certPem);
      await writeFile(renewed.caFile, ca.certPem);
      const rechained = await makeSelfSigned(local);
      assert.equal(rechained.reused, false);
      assert.ok(new X509Certificate(rechained.certPem).verify(new X509Certificate(await readFile(rechained.caFile, 'utf8')).publicKey));
    });
  });

  describe('client CA', () => {
    it('reads a CA file and refuses a missing one or one that holds no certificate', async () => {
      const file = join(dir, 'client-ca.crt');
      await writeFile(file, ca.certPem);
      assert.equal(await readClientCa(file), ca.certPem);
      await assert.rejects(readClientCa(join(dir, 'absent.crt')), certInvalid(/client CA .*absent\.crt: ENOENT/));
      await writeFile(file, 'not a certificate\n');
      await assert.rejects(readClientCa(file), certInvalid(/client CA .*client-ca\.crt: /));
    });

    it('refuses an expired CA or a file that is not PEM, and accepts a current one', async () => {
      const expired = await createCA('expired-ca', -1);
      assert.doesNotThrow(() => verifyClientCa(ca.certPem));
      assert.throws(() => verifyClientCa(expired.certPem), certInvalid(/client CA: the certificate expired at /));
      assert.throws(() => verifyClientCa(''), certInvalid(/client CA: /));
    });
  });
});
