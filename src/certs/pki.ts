import 'reflect-metadata'; // @peculiar/x509 resolves its ASN.1 providers through tsyringe, which needs it first
import { webcrypto, randomBytes, type webcrypto as WebCrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type CryptoKey = WebCrypto.CryptoKey;

/** ECDSA P-256 with SHA-256: small, fast to make, and accepted by every supported Kubernetes. */
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY = 24 * 60 * 60 * 1000;

/** A certificate and its private key, both PEM. */
export interface KeyPair {
  readonly certPem: string;
  readonly keyPem: string;
}

export interface ServingCertOptions {
  readonly dnsNames: readonly string[];
  readonly ipAddresses?: readonly string[];
  readonly validityDays?: number;
  readonly commonName?: string;
}

/** Makes a self-signed CA that may sign serving certificates only. */
export async function createCA(commonName = 'sidecar-injector-ca', validityDays = 3650): Promise<KeyPair> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${commonName}`,
    notBefore: new Date(Date.now() - 5 * 60 * 1000),
    notAfter: new Date(Date.now() + validityDays * DAY),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKey(keys.privateKey) };
}

/** Issues a TLS server certificate for the given names, signed by `ca`. */
export async function issueServingCert(ca: KeyPair, opts: ServingCertOptions): Promise<KeyPair> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKey(ca.keyPem);
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const names = [
    ...opts.dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...(opts.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${opts.commonName ?? opts.dnsNames[0] ?? 'sidecar-injector'}`,
    issuer: caCert.subject,
    notBefore: new Date(Date.now() - 5 * 60 * 1000),
    notAfter: new Date(Date.now() + (opts.validityDays ?? 365) * DAY),
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKey(keys.privateKey) };
}

/** Issues a TLS client certificate (for mutual TLS tests and tools), signed by `ca`. */
export async function issueClientCert(ca: KeyPair, commonName: string, validityDays = 365): Promise<KeyPair> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${commonName}`,
    issuer: caCert.subject,
    notBefore: new Date(Date.now() - 5 * 60 * 1000),
    notAfter: new Date(Date.now() + validityDays * DAY),
    publicKey: keys.publicKey,
    signingKey: await importKey(ca.keyPem),
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKey(keys.privateKey) };
}

async function exportKey(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return `-----BEGIN PRIVATE KEY-----\n${der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '')}\n-----END PRIVATE KEY-----\n`;
}

async function importKey(pem: string): Promise<CryptoKey> {
  const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return webcrypto.subtle.importKey('pkcs8', der, ALGORITHM, true, ['sign']);
}

// RFC 5280: a positive serial of at most 20 octets; clear the top bit so it stays positive.
function serial(): string {
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f;
  return bytes.toString('hex');
}
