import { X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { InjectorError } from '../errors.js';
import type { KeyPair } from './pki.js';

/** File names inside a kubernetes.io/tls Secret mounted as a volume. */
export const TLS_CERT_FILE = 'tls.crt';
export const TLS_KEY_FILE = 'tls.key';

/** Reads the serving certificate and key from a directory laid out like a kubernetes.io/tls Secret. */
export async function readCertDir(dir: string): Promise<KeyPair> {
  try {
    const [certPem, keyPem] = await Promise.all([readFile(join(dir, TLS_CERT_FILE), 'utf8'), readFile(join(dir, TLS_KEY_FILE), 'utf8')]);
    return { certPem, keyPem };
  } catch (err) {
    throw new InjectorError('CERT_INVALID', [`${dir}: ${(err as Error).message}`], { cause: err });
  }
}

/**
 * Makes a throw-away CA and a certificate for localhost and 127.0.0.1, so that a fresh clone serves
 * at once. The CA is written to `<dir>/ca.crt` for clients (curl --cacert) to trust.
 */
export async function makeSelfSigned(dir: string): Promise<KeyPair & { readonly caFile: string }> {
  // pki.js (and @peculiar/x509 behind it, ~12 MB) is loaded only when a certificate must be made.
  const { createCA, issueServingCert } = await import('./pki.js');
  const ca = await createCA('sidecar-injector-local-ca', 30);
  const serving = await issueServingCert(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'], validityDays: 30 });
  const caFile = resolve(dir, 'ca.crt');
  await mkdir(dir, { recursive: true });
  await writeFile(caFile, ca.certPem, { mode: 0o644 });
  return { ...serving, caFile };
}

/**
 * Reads the CA bundle that client certificates must chain to (mutual TLS). Fails at start-up, not at
 * the first handshake, when the file is missing or holds no certificate.
 */
export async function readClientCa(file: string): Promise<string> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
    new X509Certificate(pem); // throws on anything but a PEM certificate
  } catch (err) {
    throw new InjectorError('CERT_INVALID', [`client CA ${file}: ${(err as Error).message}`], { cause: err });
  }
  return pem;
}

/** The validity window of the first certificate in a PEM bundle (node:crypto, so serving from files never loads @peculiar/x509). */
export function certificateValidity(certPem: string): { readonly notBefore: Date; readonly notAfter: Date } {
  const cert = new X509Certificate(certPem);
  return { notBefore: new Date(cert.validFrom), notAfter: new Date(cert.validTo) };
}
