/**
 * An install as a user makes it, run locally for kubeadmit: the objects rendered from the repository
 * (kustomize or helm, test/manifests/render.ts), and the injector started as the image starts it —
 * the Dockerfile's ENTRYPOINT node flags and ENV, the Deployment's args and environment — with only what a
 * cluster would provide replaced by local equivalents:
 *   - the serving certificate: made here for the Service's DNS name (what the apiserver verifies),
 *     given with --cert-dir instead of --cert-secret (which needs a cluster to write the Secret);
 *   - the templates volume: the rendered ConfigMap's keys written to a directory, which
 *     --templates-dir then names, as the kubelet mounts it;
 *   - the ports: free ones on 127.0.0.1 (kubeadmit sends every Service to that address);
 *   - the Kubernetes API, when the install reads SidecarTemplates: the fake API server.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createCA, issueServingCert } from '../../src/certs/pki.js';
import { CLI_ENTRY } from '../helpers/cli.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { kubeadmit, type Admission, type Scenario } from '../helpers/kubeadmit.js';
import { injector, one, type Obj } from '../manifests/render.js';

/** The image's last stage: the node flags of its ENTRYPOINT (between the node binary and the script) and its ENV. */
export function imageEntrypoint(): { nodeFlags: string[]; env: Record<string, string> } {
  const stages = readFileSync('Dockerfile', 'utf8').split(/^FROM /m);
  const lines = stages.at(-1)!.split('\n');
  const line = lines.find((l) => l.startsWith('ENTRYPOINT '));
  if (line === undefined) throw new Error('Dockerfile has no ENTRYPOINT in its last stage');
  const words = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[];
  const env = Object.fromEntries(
    lines
      .filter((l) => l.startsWith('ENV '))
      .flatMap((l) =>
        l
          .slice(4)
          .trim()
          .split(/\s+/)
          .map((kv) => kv.split('=') as [string, string]),
      ),
  );
  return { nodeFlags: words.slice(1, -1), env };
}

export interface RunningInstall {
  /** 127.0.0.1:PORT, where the server serves (kubeadmit's --addr). */
  readonly addr: string;
  readonly port: number;
  /** The CA that signed the serving certificate (kubeadmit's --ca, a caBundle's content). */
  readonly caFile: string;
  readonly caPem: string;
  /** The serving certificate and key (for a stand-in in front of the server). */
  readonly serving: { readonly certPem: string; readonly keyPem: string };
  /** <service>.<namespace>.svc, the name the certificate is for. */
  readonly dnsName: string;
  /** The rendered webhook configurations, as one JSON List file (kubeadmit's --config). */
  readonly configFile: string;
  readonly configurations: Obj[];
  /** The fake API server, when the install reads SidecarTemplates. */
  readonly api?: FakeApiServer;
  /** Every log line of the server. */
  readonly logs: any[];
  /** Runs a scenario through kubeadmit against this install alone. */
  admit(scenario: Scenario, opts?: { timeout?: string; configs?: readonly string[]; addr?: string }): Promise<Admission>;
  close(): Promise<void>;
}

export interface StartOptions {
  /** Templates to serve instead of the rendered ConfigMap's (file name to YAML). */
  readonly templates?: Readonly<Record<string, string>>;
  /** More server flags, after the Deployment's. */
  readonly flags?: readonly string[];
}

/** The webhook configurations among rendered objects. */
export const webhookConfigurations = (objects: readonly Obj[]): Obj[] =>
  objects.filter((o) => o.kind === 'MutatingWebhookConfiguration' || o.kind === 'ValidatingWebhookConfiguration');

/** The DNS name the apiserver dials and verifies for the install's webhooks: <service>.<namespace>.svc. */
export function serviceDnsName(objects: readonly Obj[]): string {
  const service = webhookConfigurations(objects)[0]!.webhooks[0].clientConfig.service;
  return `${service.name}.${service.namespace}.svc`;
}

/**
 * The injector's command as its Deployment runs it in the image: the node flags of the image's
 * ENTRYPOINT, the container's args with the templates volume written under `dir` as the kubelet
 * mounts it (one file per key of the ConfigMap, or `templates` instead), and the environment of the
 * image and of the container.
 */
export async function deploymentCommand(
  objects: readonly Obj[],
  dir: string,
  templates?: Readonly<Record<string, string>>,
): Promise<{ nodeFlags: string[]; args: string[]; env: NodeJS.ProcessEnv }> {
  const deployment = one(objects, 'Deployment');
  const container = injector(objects);
  const mount = (container.volumeMounts as Obj[]).find((m) => m.name === 'templates');
  const volume = (deployment.spec.template.spec.volumes as Obj[]).find((v) => v.name === 'templates');
  const templatesDir = join(dir, 'templates');
  await mkdir(templatesDir);
  const files = templates ?? (volume ? one(objects, 'ConfigMap', volume.configMap.name).data : {});
  for (const [name, text] of Object.entries(files as Record<string, string>)) await writeFile(join(templatesDir, name), text);
  const args = (container.args as string[]).map((a) => (mount && a === `--templates-dir=${mount.mountPath}` ? `--templates-dir=${templatesDir}` : a));
  const image = imageEntrypoint();
  const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'], HOME: process.env['HOME'], ...image.env };
  for (const e of (container.env ?? []) as Obj[]) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = deployment.metadata.namespace;
  }
  return { nodeFlags: image.nodeFlags, args, env };
}

/** Starts the injector of `objects` as its Deployment runs it. */
export async function startInstall(binary: string, objects: readonly Obj[], opts: StartOptions = {}): Promise<RunningInstall> {
  const dir = await mkdtemp(join(tmpdir(), 'apiserver-install-'));
  const ca = await createCA('kubeadmit-test-ca', 1);
  const serving = await issueServingCert(ca, { dnsNames: [serviceDnsName(objects)], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  const certDir = join(dir, 'tls');
  await mkdir(certDir);
  await writeFile(join(certDir, 'tls.crt'), serving.certPem);
  await writeFile(join(certDir, 'tls.key'), serving.keyPem);
  const caFile = join(dir, 'ca.crt');
  await writeFile(caFile, ca.certPem);

  const { nodeFlags, args: deploymentArgs, env } = await deploymentCommand(objects, dir, opts.templates);
  const args = deploymentArgs.map((a) => (a.startsWith('--cert-secret=') || a.startsWith('--cert-dir=') ? `--cert-dir=${certDir}` : a));
  let api: FakeApiServer | undefined;
  if (env['SIDECAR_INJECTOR_TEMPLATES_SOURCE'] === 'both' || env['SIDECAR_INJECTOR_TEMPLATES_SOURCE'] === 'cluster') {
    api = await startFakeApiServer();
    args.push(`--kubeconfig=${api.kubeconfig}`);
  }
  args.push('--port=0', '--health-port=0', '--host=127.0.0.1', ...(opts.flags ?? []));

  const child: ChildProcess = spawn(process.execPath, [...nodeFlags, ...CLI_ENTRY, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: any[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        logs.push(JSON.parse(line));
      } catch {
        logs.push({ msg: line });
      }
      if (typeof logs.at(-1).port === 'number') resolve(logs.at(-1).port);
    });
    child.on('close', (code) => reject(new Error(`the injector exited (${code}) before serving: ${stderr}${logs.map((l) => JSON.stringify(l)).join('\n')}`)));
  });

  const configurations = webhookConfigurations(objects);
  const configFile = join(dir, 'webhooks.json');
  await writeFile(configFile, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: configurations }));
  const addr = `127.0.0.1:${port}`;
  return {
    addr,
    port,
    caFile,
    caPem: ca.certPem,
    serving,
    dnsName: serviceDnsName(objects),
    configFile,
    configurations,
    ...(api && { api }),
    logs,
    admit: (scenario, o = {}) =>
      kubeadmit(
        { binary, configs: o.configs ?? [configFile], addr: o.addr ?? addr, ca: caFile, ...(o.timeout !== undefined && { timeout: o.timeout }) },
        scenario,
      ),
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.on('close', resolve));
        child.kill('SIGKILL');
        await exited;
      }
      await api?.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Writes webhook configurations to a file of their own (a changed copy, a second install's). */
export async function writeConfigurations(configurations: readonly Obj[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'apiserver-webhooks-'));
  const file = join(dir, 'webhooks.json');
  await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: configurations }));
  return file;
}
