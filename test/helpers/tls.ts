import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCA, issueServingCert, type KeyPair } from '../../src/certs/pki.js';

export interface TestCerts {
  readonly ca: KeyPair;
  readonly serving: KeyPair;
  /** A directory holding tls.crt and tls.key, like a mounted kubernetes.io/tls Secret. */
  readonly certDir: string;
}

/** Makes a CA and a serving certificate for localhost / 127.0.0.1 in a fresh temporary directory. */
export async function makeTestCerts(): Promise<TestCerts> {
  const ca = await createCA('test-ca', 1);
  const serving = await issueServingCert(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  const certDir = await mkdtemp(join(tmpdir(), 'sidecar-injector-certs-'));
  await writeFile(join(certDir, 'tls.crt'), serving.certPem);
  await writeFile(join(certDir, 'tls.key'), serving.keyPem);
  return { ca, serving, certDir };
}
