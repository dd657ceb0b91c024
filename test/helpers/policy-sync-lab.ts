import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCA, issueServingCert } from '../../src/certs/pki.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import type { Config } from '../../src/config/config.js';
import { createLogger, type Logger } from '../../src/log.js';
import { serve, start, type Injector, type Running } from '../../src/main.js';
import type { FakeApiServer } from './fake-apiserver.js';

/**
 * The injector in `--mode policy` or `--mode hybrid` against the API stand-in, started as the
 * Deployment starts it (serve's flags, the real composition root): the setup that
 * test/policy/sync.test.ts and test/server/hybrid.test.ts share.
 */

/** The injector's namespace in these tests (--namespace). */
export const NAMESPACE = 'sidecar-injector';
/** The webhook Service's DNS name, which the shipped webhook configurations name: the serving certificate holds it. */
export const SERVICE_DNS = 'sidecar-injector.sidecar-injector.svc';
/** The kinds of objects the sync writes, in the order it applies them. */
export const POLICY_KINDS = [
  'MutatingAdmissionPolicy',
  'MutatingAdmissionPolicyBinding',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
] as const;

/** An injector of either mode: its health server, its log, and how to stop it. */
export interface PolicyInjector<T extends Injector = Injector> {
  readonly injector: T;
  /** http://127.0.0.1:HEALTHPORT */
  readonly healthUrl: string;
  /** The log lines written so far (level info and above), parsed. */
  logs(): any[];
  /** The status /readyz answers. */
  ready(): Promise<number>;
  /** The value of one series of /metrics (`name{labels}`), undefined when it is absent. */
  metric(series: string): Promise<number | undefined>;
  close(): Promise<void>;
}

/** A hybrid injector: the webhook over real TLS besides the sync. */
export interface HybridInjector extends PolicyInjector<Running> {
  /** https://127.0.0.1:PORT */
  readonly url: string;
  /** The CA that issued the serving certificate (PEM), also in `<certDir>/ca.crt`. */
  readonly ca: string;
  readonly certDir: string;
}

/** `serve --mode policy` with the templates of `templatesDir` (or, with `--templates-source cluster` among `flags`, the SidecarTemplate objects). */
export async function startPolicyInjector(api: FakeApiServer, templatesDir: string, flags: readonly string[] = []): Promise<PolicyInjector> {
  return launch(serveConfig(['--mode', 'policy', ...common(api, templatesDir), '--templates-poll-seconds', '1', ...flags], {}), start);
}

/**
 * `serve --mode hybrid` with the templates of `templatesDir` and `flags`, serving a certificate for
 * SERVICE_DNS and 127.0.0.1 made now and written to `certDir` (tls.crt, tls.key, ca.crt), a fresh
 * directory removed at close when none is given.
 */
export async function startHybridInjector(
  api: FakeApiServer,
  templatesDir: string,
  { certDir, flags = [] }: { readonly certDir?: string; readonly flags?: readonly string[] } = {},
): Promise<HybridInjector> {
  const dir = certDir ?? (await mkdtemp(join(tmpdir(), 'hybrid-certs-')));
  const authority = await createCA('hybrid-ca', 1);
  const serving = await issueServingCert(authority, { dnsNames: [SERVICE_DNS], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  await writeFile(join(dir, 'tls.crt'), serving.certPem);
  await writeFile(join(dir, 'tls.key'), serving.keyPem);
  await writeFile(join(dir, 'ca.crt'), authority.certPem);
  const config = serveConfig(['--mode', 'hybrid', '--port', '0', '--cert-dir', dir, ...common(api, templatesDir), ...flags], {});
  const started = await launch(config, serve);
  return {
    ...started,
    url: `https://127.0.0.1:${started.injector.port}`,
    ca: authority.certPem,
    certDir: dir,
    async close() {
      await started.close();
      if (certDir === undefined) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A copy of the repository's templates/ in a fresh temporary directory, to edit. */
export async function templatesCopy(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'policy-sync-'));
  await cp('templates', dir, { recursive: true });
  return dir;
}

/** A stored object as it was applied: without what the apiserver adds to metadata. */
export function asApplied(obj: any): any {
  const { uid: _u, generation: _g, resourceVersion: _r, managedFields: _m, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

/** The names of the stored objects of one kind, in the stand-in's order. */
export function policyNames(api: FakeApiServer, kind: (typeof POLICY_KINDS)[number]): string[] {
  return api.policies(kind).map((o) => o.metadata.name);
}

/** The flags both modes take: loopback ports, the templates, the stand-in's kubeconfig, the namespace. */
function common(api: FakeApiServer, templatesDir: string): string[] {
  return ['--health-port', '0', '--host', '127.0.0.1', '--templates-dir', templatesDir, '--kubeconfig', api.kubeconfig, '--namespace', NAMESPACE];
}

async function launch<T extends Injector>(config: Config, run: (config: Config, logger: Logger) => Promise<T>): Promise<PolicyInjector<T>> {
  const lines: string[] = [];
  const injector = await run(config, createLogger('info', { write: (line: string) => void lines.push(line) }));
  const healthUrl = `http://127.0.0.1:${injector.healthPort}`;
  return {
    injector,
    healthUrl,
    logs: () => lines.map((l) => JSON.parse(l)),
    ready: async () => (await fetch(`${healthUrl}/readyz`)).status,
    async metric(series) {
      const line = (await (await fetch(`${healthUrl}/metrics`)).text()).split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    },
    close: () => injector.close(),
  };
}
