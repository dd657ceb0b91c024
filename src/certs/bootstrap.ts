import 'reflect-metadata'; // before @peculiar/x509, as in pki.ts
import * as x509 from '@peculiar/x509';
import { InjectorError } from '../errors.js';
import type { SecretContent, SecretStore, StoredSecret } from '../kube/secret.js';
import type { Logger } from '../log.js';
import { createCA, issueServingCert, type KeyPair } from './pki.js';

/** The keys of the Secret: a kubernetes.io/tls Secret plus the CA that signs it. */
export const SecretKeys = { cert: 'tls.crt', key: 'tls.key', caBundle: 'ca.crt', caKey: 'ca.key' } as const;

/** Set while a CA rotation is under way: when its current phase began (RFC 3339). */
export const ROTATION_ANNOTATION = 'sidecar-injector.io/ca-rotation-phase-since';

/** When certificates are renewed, and for how long old and new CA overlap. */
export interface CertPolicy {
  /** DNS names of the Service, as the API server dials it (`<svc>.<ns>.svc`). */
  readonly dnsNames: readonly string[];
  readonly caValidityDays: number;
  readonly servingValidityDays: number;
  /** Renew a certificate once less than this share of its lifetime remains (cert-manager: 1/3). */
  readonly renewWhenRemaining: number;
  /**
   * How long each CA rotation phase lasts: the new CA is trusted this long before anyone serves a
   * certificate it signed, and the old CA stays trusted this long after. Longer than a few
   * certificate checks, so that every replica has swapped in between.
   */
  readonly overlapMs: number;
}

export const DefaultPolicy = { caValidityDays: 3650, servingValidityDays: 365, renewWhenRemaining: 1 / 3 } as const;

/**
 * The rotation overlap for replicas that check every `checkIntervalMs`: several checks, so every
 * replica swaps within it, and never under five minutes, so every API server sees the new caBundle.
 */
export function overlapFor(checkIntervalMs: number): number {
  return Math.max(3 * checkIntervalMs, 5 * 60_000);
}

/** The names the API server may use for `service: {name, namespace}` (it dials `<svc>.<ns>.svc`). */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [service, `${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}

/** What a replica serves and publishes after a reconcile. */
export interface ServingState {
  readonly serving: KeyPair;
  /** Every CA the webhooks must trust, newest first (two during a rotation). */
  readonly caBundlePem: string;
  readonly notAfter: Date;
}

/** The next change the Secret needs, or none. */
export type Step = { readonly kind: 'none'; readonly reason: string } | { readonly kind: 'write'; readonly reason: string; readonly content: SecretContent };

export interface BootstrapDeps {
  readonly store: SecretStore;
  readonly policy: CertPolicy;
  /** Puts a CA bundle into the webhook configurations; true when every webhook trusts it. Absent: someone else does. */
  readonly publish?: (caBundlePem: string) => Promise<boolean>;
  readonly logger: Logger;
  readonly now?: () => number;
}

/** Bounds on one reconcile: lost races, and writes (a fresh start with a due rotation needs three). */
const MAX_CONFLICTS = 8;
const MAX_WRITES = 4;

/**
 * Makes sure the Secret holds a CA and a serving certificate that is valid for a good while,
 * publishes the CA bundle, and returns what to serve. Safe to run on every replica at once: each
 * write carries the resourceVersion it read, and the loser of a race reads again.
 */
export async function reconcileCertificate(deps: BootstrapDeps): Promise<ServingState> {
  const now = deps.now ?? Date.now;
  const where = `${deps.store.namespace}/${deps.store.name}`;
  let secret = await deps.store.read();
  let conflicts = 0;
  for (let writes = 0; ;) {
    const published = secret === undefined ? false : deps.publish === undefined ? true : await deps.publish(secret.data[SecretKeys.caBundle] ?? '');
    const step = writes >= MAX_WRITES ? ({ kind: 'none', reason: 'write budget spent' } as const) : await nextStep(secret, deps.policy, now(), published);
    if (step.kind === 'none') {
      if (secret === undefined) throw new InjectorError('CERT_SECRET_INVALID', [where, step.reason]);
      return servingState(secret, where);
    }
    const result = secret === undefined ? await deps.store.create(step.content) : await deps.store.replace(secret, step.content);
    if (result.ok) {
      writes++;
      deps.logger.info({ secret: where, reason: step.reason }, 'certificate Secret written');
      secret = result.secret;
      continue;
    }
    if (++conflicts >= MAX_CONFLICTS) throw new InjectorError('CERT_SECRET_CONTENDED', [where, conflicts]);
    deps.logger.debug({ secret: where, reason: step.reason }, 'lost a write race on the certificate Secret; reading it again');
    secret = await deps.store.read();
  }
}

/** Decides the Secret's next change from its content alone, so every replica reaches the same answer. */
async function nextStep(secret: StoredSecret | undefined, policy: CertPolicy, now: number, published: boolean): Promise<Step> {
  if (secret === undefined) return write('create the CA and serving certificate', await freshContent(policy, now));
  const parsed = parse(secret);
  if (typeof parsed === 'string') return write(`replace an unusable Secret (${parsed})`, await freshContent(policy, now));
  const { cas, caKeyPem, serving } = parsed;
  const newest = cas[0]!;
  const rotating = cas.length > 1;
  const since = Date.parse(secret.annotations[ROTATION_ANNOTATION] ?? '') || 0;
  const newestPair = { certPem: newest.toString('pem'), keyPem: caKeyPem };
  const byNewest = await issuedBy(serving, newest);

  if (!rotating && dueForRenewal(newest, now, policy.renewWhenRemaining)) {
    // Phase 1: trust old and new CA together, keep serving the old certificate.
    const next = await createCA(`sidecar-injector-ca@${Math.floor(now / 1000)}`, policy.caValidityDays);
    return write('rotate the CA: publish the new CA beside the old one', content(next, [next.certPem, ...cas.map(pem)], pairOf(secret), stamp(now)));
  }
  if (!byNewest && rotating) {
    // Phase 2: once every webhook trusts the new CA, and for long enough, serve a certificate it signed.
    if (!published || now < since + policy.overlapMs) return { kind: 'none', reason: 'waiting for the new CA to reach every webhook' };
    return write('rotate the CA: serve a certificate from the new CA', content(newestPair, cas.map(pem), await issue(newestPair, policy), stamp(now)));
  }
  if (!byNewest) return write('the serving certificate is not signed by the CA', content(newestPair, cas.map(pem), await issue(newestPair, policy), {}));
  if (rotating && now >= since + policy.overlapMs) {
    // Phase 3: every replica has had time to swap; stop trusting the old CA.
    return write('rotate the CA: drop the old CA', content(newestPair, [pem(newest)], pairOf(secret), {}));
  }
  const names = missingNames(serving, policy.dnsNames);
  if (names.length > 0)
    return write(`the serving certificate lacks ${names.join(', ')}`, content(newestPair, cas.map(pem), await issue(newestPair, policy), secret.annotations));
  if (dueForRenewal(serving, now, policy.renewWhenRemaining))
    return write('renew the serving certificate', content(newestPair, cas.map(pem), await issue(newestPair, policy), secret.annotations));
  return { kind: 'none', reason: 'current' };
}

function write(reason: string, c: SecretContent): Step {
  return { kind: 'write', reason, content: c };
}

async function freshContent(policy: CertPolicy, now: number): Promise<SecretContent> {
  const ca = await createCA(`sidecar-injector-ca@${Math.floor(now / 1000)}`, policy.caValidityDays);
  return content(ca, [ca.certPem], await issue(ca, policy), {});
}

function issue(ca: KeyPair, policy: CertPolicy): Promise<KeyPair> {
  return issueServingCert(ca, { dnsNames: policy.dnsNames, validityDays: policy.servingValidityDays });
}

function content(ca: KeyPair, bundle: readonly string[], serving: KeyPair, annotations: Readonly<Record<string, string>>): SecretContent {
  return {
    data: {
      [SecretKeys.cert]: serving.certPem,
      [SecretKeys.key]: serving.keyPem,
      [SecretKeys.caBundle]: bundle.map((p) => p.trim()).join('\n') + '\n',
      [SecretKeys.caKey]: ca.keyPem,
    },
    annotations,
  };
}

function stamp(now: number): Record<string, string> {
  return { [ROTATION_ANNOTATION]: new Date(now).toISOString() };
}

function pairOf(secret: StoredSecret): KeyPair {
  return { certPem: secret.data[SecretKeys.cert] ?? '', keyPem: secret.data[SecretKeys.key] ?? '' };
}

function pem(cert: x509.X509Certificate): string {
  return cert.toString('pem');
}

interface Parsed {
  readonly cas: readonly x509.X509Certificate[];
  readonly caKeyPem: string;
  readonly serving: x509.X509Certificate;
}

/** The Secret's certificates, or why they cannot be used. */
function parse(secret: StoredSecret): Parsed | string {
  const missing = Object.values(SecretKeys).filter((k) => !secret.data[k]);
  if (missing.length > 0) return `missing ${missing.join(', ')}`;
  try {
    const cas = splitPem(secret.data[SecretKeys.caBundle]!).map((p) => new x509.X509Certificate(p));
    if (cas.length === 0) return `no certificate in ${SecretKeys.caBundle}`;
    return { cas, caKeyPem: secret.data[SecretKeys.caKey]!, serving: new x509.X509Certificate(secret.data[SecretKeys.cert]!) };
  } catch (err) {
    return (err as Error).message;
  }
}

/** The PEM blocks of a bundle, in order. */
export function splitPem(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

async function issuedBy(cert: x509.X509Certificate, ca: x509.X509Certificate): Promise<boolean> {
  if (cert.issuer !== ca.subject) return false;
  return cert.verify({ publicKey: ca.publicKey, signatureOnly: true });
}

function dueForRenewal(cert: x509.X509Certificate, now: number, share: number): boolean {
  const lifetime = cert.notAfter.getTime() - cert.notBefore.getTime();
  return cert.notAfter.getTime() - now < lifetime * share;
}

function missingNames(cert: x509.X509Certificate, wanted: readonly string[]): string[] {
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  const have = new Set((san?.names.items ?? []).filter((n) => n.type === 'dns').map((n) => n.value));
  return wanted.filter((n) => !have.has(n));
}

function servingState(secret: StoredSecret, where: string): ServingState {
  const parsed = parse(secret);
  if (typeof parsed === 'string') throw new InjectorError('CERT_SECRET_INVALID', [where, parsed]);
  return { serving: pairOf(secret), caBundlePem: secret.data[SecretKeys.caBundle]!, notAfter: parsed.serving.notAfter };
}
