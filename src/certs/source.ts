import { createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { InjectorError } from '../errors.js';
import type { KeyPair } from './pki.js';

/** File names inside a kubernetes.io/tls Secret mounted as a volume. */
const TLS_CERT_FILE = 'tls.crt';
const TLS_KEY_FILE = 'tls.key';

/** Reads the serving certificate and key from a directory laid out like a kubernetes.io/tls Secret. */
export async function readCertDir(dir: string): Promise<KeyPair> {
  try {
    const [certPem, keyPem] = await Promise.all([readFile(join(dir, TLS_CERT_FILE), 'utf8'), readFile(join(dir, TLS_KEY_FILE), 'utf8')]);
    return { certPem, keyPem };
  } catch (err) {
    throw new InjectorError('CERT_INVALID', [`${dir}: ${(err as Error).message}`], { cause: err });
  }
}

/** How long the self-signed CA and certificate are valid. */
const SELF_SIGNED_DAYS = 30;
/** A kept self-signed certificate is served again only while it has at least this long to run. */
const SELF_SIGNED_MIN_LEFT_MS = 24 * 60 * 60 * 1000;

/**
 * A CA and a certificate for localhost and 127.0.0.1, so that a fresh clone serves at once. The CA
 * is written to `<dir>/ca.crt` for clients (curl --cacert) to trust, the serving pair beside it
 * (tls.crt, tls.key). A pair already there that chains to ca.crt and has a day left is served
 * again, so a second `npm start` (which then fails on the busy port) or a restart never replaces
 * the certificate a running server serves and its clients trust (test/certs/source.test.ts). Each file is written
 * whole (a temporary, then a rename), so a reader never sees half of one.
 */
export async function makeSelfSigned(dir: string, now: Date = new Date()): Promise<KeyPair & { readonly caFile: string; readonly reused: boolean }> {
  const caFile = resolve(dir, 'ca.crt');
  const kept = await keptSelfSigned(dir, caFile, now);
  if (kept !== undefined) return { ...kept, caFile, reused: true };
  // pki.js (and @peculiar/x509 behind it, ~12 MB) is loaded only when a certificate must be made.
  const { createCA, issueServingCert } = await import('./pki.js');
  const ca = await createCA('sidecar-injector-local-ca', SELF_SIGNED_DAYS);
  const serving = await issueServingCert(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'], validityDays: SELF_SIGNED_DAYS });
  await mkdir(dir, { recursive: true });
  await writeWhole(join(dir, TLS_KEY_FILE), serving.keyPem, 0o600);
  await writeWhole(join(dir, TLS_CERT_FILE), serving.certPem, 0o644);
  await writeWhole(caFile, ca.certPem, 0o644);
  return { ...serving, caFile, reused: false };
}

/** The self-signed pair kept in `dir`, when it can still serve localhost for a day and chains to its ca.crt. */
async function keptSelfSigned(dir: string, caFile: string, now: Date): Promise<KeyPair | undefined> {
  let pair: KeyPair;
  let caPem: string;
  try {
    [pair, caPem] = await Promise.all([readCertDir(dir), readFile(caFile, 'utf8')]);
  } catch {
    return undefined; // none kept yet (or unreadable): make a new one
  }
  if (servingPairFault(pair, now) !== undefined) return undefined;
  try {
    const cert = new X509Certificate(pair.certPem);
    const ok =
      cert.verify(new X509Certificate(caPem).publicKey) &&
      cert.checkHost('localhost') !== undefined &&
      Date.parse(cert.validTo) - now.getTime() >= SELF_SIGNED_MIN_LEFT_MS;
    return ok ? pair : undefined;
  } catch {
    return undefined; // ca.crt is not a certificate: make a new pair
  }
}

async function writeWhole(file: string, text: string, mode: number): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode });
  await rename(temporary, file);
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

/**
 * Throws CERT_INVALID, saying why, unless the pair can serve: the certificate and the key both
 * parse (an empty or half-written file does not), the key is the certificate's, and the
 * certificate has not expired. Checked before a pair is served, at start and on every reload,
 * because a TLS context made from a bad pair fails every handshake (an empty key is silently
 * left out of the context).
 */
export function verifyServingPair(pair: KeyPair, where = '', now: Date = new Date()): void {
  const fault = servingPairFault(pair, now);
  if (fault !== undefined) throw new InjectorError('CERT_INVALID', [where === '' ? fault : `${where}: ${fault}`]);
}

function servingPairFault(pair: KeyPair, now: Date): string | undefined {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pair.certPem);
  } catch (err) {
    return `${TLS_CERT_FILE} holds no certificate (${(err as Error).message})`;
  }
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey(pair.keyPem);
  } catch (err) {
    return `${TLS_KEY_FILE} holds no private key (${(err as Error).message})`;
  }
  if (!cert.checkPrivateKey(key)) return `${TLS_KEY_FILE} is not the key of the certificate in ${TLS_CERT_FILE}`;
  if (new Date(cert.validTo) <= now) return `the certificate expired at ${new Date(cert.validTo).toISOString()}`;
  try {
    createSecureContext({ cert: pair.certPem, key: pair.keyPem });
  } catch (err) {
    return `the pair does not make a TLS context (${(err as Error).message})`;
  }
  return undefined;
}

/** Throws CERT_INVALID unless `pem` holds CA certificates that make a TLS context and the first has not expired. */
export function verifyClientCa(pem: string, now: Date = new Date()): void {
  try {
    const cert = new X509Certificate(pem);
    if (new Date(cert.validTo) <= now) throw new Error(`the certificate expired at ${new Date(cert.validTo).toISOString()}`);
    createSecureContext({ ca: pem });
  } catch (err) {
    throw new InjectorError('CERT_INVALID', [`client CA: ${(err as Error).message}`], { cause: err });
  }
}

/** The validity window of the first certificate in a PEM bundle (node:crypto, so serving from files never loads @peculiar/x509). */
export function certificateValidity(certPem: string): { readonly notBefore: Date; readonly notAfter: Date } {
  const cert = new X509Certificate(certPem);
  return { notBefore: new Date(cert.validFrom), notAfter: new Date(cert.validTo) };
}
