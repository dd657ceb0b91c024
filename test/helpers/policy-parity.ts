import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCA, issueServingCert } from '../../src/certs/pki.js';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { clusterTemplates } from '../../src/cli/args.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { createLogger } from '../../src/log.js';
import { serve, type Running } from '../../src/main.js';
import { compilePolicies } from '../../src/policy/compile.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { admissionView } from '../corpus/admission-view.js';
import { DefaultNamespace, PodsDir, readYaml11 } from '../corpus/corpus.js';
import { findKubeadmit, kubeadmit, type Admission, type Scenario } from './kubeadmit.js';
import { eventually } from './sidecartemplates.js';

const { applyPatch } = fastJsonPatch;

/**
 * Parity of the two install modes through the kube-apiserver's own admission code (kubeadmit, its
 * MutatingAdmissionPolicy and ValidatingAdmissionPolicy plugins and its webhook plugins): for the
 * bundled templates, every example and a sample of the real-world corpus, the pod stored with the
 * compiled policies equals the pod stored with the webhook (the real server over TLS), except the
 * status annotation, which only the webhook writes. The validating policy refuses what /validate
 * refuses. kubeadmit: $KUBEADMIT, else ~/.cache/kubeadmit/kubeadmit (../shared/tools/kubeadmit/build.sh).
 */
const found = findKubeadmit();
export const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

export const STATUS = 'sidecar-injector.io/status';
export const INJECT = 'sidecar-injector.io/inject';
const SERVICE_DNS = 'sidecar-injector.sidecar-injector.svc';
const REVISION_DNS = 'sidecar-injector-canary.sidecar-injector.svc';

export type Obj = Record<string, any>;
export type { Admission };

/**
 * Every example, and every STEP-th corpus manifest (the Jobs and CronJobs always): 24 by default, so
 * that the file fits the suite's 2 minutes; PARITY_STEP=1 plays the whole corpus (minutes).
 */
const STEP = Number(process.env['PARITY_STEP'] ?? 24);
export function pods(): { name: string; manifest: Obj }[] {
  const out = ['examples/pod.yaml', 'examples/deployment.yaml'].map((f) => ({ name: f, manifest: readYaml11(f)[0]! }));
  const files = readdirSync(PodsDir).sort();
  files.forEach((f, i) => {
    if (i % STEP === 0 || /job/.test(f)) out.push({ name: f, manifest: readYaml11(join(PodsDir, f))[0]! });
  });
  return out;
}

export interface Modes {
  readonly dir: string;
  readonly addr: string;
  readonly caFile: string;
  /** kubeadmit --config files: the installed webhook configurations, the compiled policies, and each kind's validating part alone. */
  readonly webhooks: string;
  readonly validatingWebhook: string;
  readonly policies: string;
  readonly validatingPolicy: string;
  /** The compiled policies and bindings. */
  readonly objects: readonly Record<string, unknown>[];
  /** Writes more objects as a kubeadmit --config file, and returns its path. */
  write(name: string, items: readonly unknown[]): Promise<string>;
  close(): Promise<void>;
}

/** Where the templates come from, and which install is compared. */
export interface ModeOptions {
  /** The cluster's SidecarTemplates through this kubeconfig (the API stand-in) instead of the directory. */
  readonly kubeconfig?: string;
  /** A revision's install: its webhook configurations (manifests/components/revision) and policies. */
  readonly revision?: 'canary';
  /** The required webhooks installed too (manifests/components/required). */
  readonly required?: boolean;
  /** Extra PolicyOptions (hybrid). */
  readonly hybrid?: boolean;
}

/**
 * The real server serving `templates` (a directory, or the cluster's SidecarTemplates) over TLS for
 * the Service's DNS name, the webhook configurations a user installs for it, and the policies the
 * same templates compile to.
 */
export async function startModes(templates: string, options: ModeOptions = {}): Promise<Modes> {
  const dir = await mkdtemp(join(tmpdir(), 'policy-parity-'));
  const ca = await createCA('parity-ca', 1);
  const serving = await issueServingCert(ca, { dnsNames: [SERVICE_DNS, REVISION_DNS], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  await writeFile(join(dir, 'tls.crt'), serving.certPem);
  await writeFile(join(dir, 'tls.key'), serving.keyPem);
  const caFile = join(dir, 'ca.crt');
  await writeFile(caFile, ca.certPem);
  const source =
    options.kubeconfig === undefined
      ? ['--templates-dir', templates]
      : ['--templates-source', 'cluster', '--kubeconfig', options.kubeconfig, '--namespace', 'sidecar-injector'];
  const revision = options.revision === undefined ? [] : ['--revision', options.revision];
  const config = serveConfig(['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', dir, ...source, ...revision], {});
  const running: Running = await serve(config, createLogger('silent'));
  // With SidecarTemplates, the server is ready once its first list is in.
  if (options.kubeconfig !== undefined)
    await eventually(async () => (await fetch(`http://127.0.0.1:${running.healthPort}/readyz`)).status === 200, 'the server ready');
  const list = (items: readonly unknown[]): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
  const write = async (name: string, items: readonly unknown[]): Promise<string> => {
    await writeFile(join(dir, name), list(items));
    return join(dir, name);
  };
  const shipped = installedWebhooks(options);
  const set =
    options.kubeconfig === undefined
      ? await loadTemplateSet(templates)
      : await clusterTemplates({ kubeconfig: options.kubeconfig, templatesNamespace: 'sidecar-injector' }, () => undefined);
  const { objects } = compilePolicies(set, {
    namespace: 'sidecar-injector',
    ...(options.revision !== undefined && { revision: options.revision }),
    ...(options.hybrid === true && { hybrid: true }),
  });
  return {
    dir,
    addr: `127.0.0.1:${running.port}`,
    caFile,
    objects,
    webhooks: await write('webhooks.json', shipped),
    validatingWebhook: await write(
      'validating-webhook.json',
      shipped.filter((c) => c['kind'] === 'ValidatingWebhookConfiguration'),
    ),
    policies: await write('policies.json', objects),
    validatingPolicy: await write(
      'validating-policy.json',
      objects.filter((o) => String(o['kind']).startsWith('Validating')),
    ),
    write,
    close: async () => {
      await running.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The webhook configurations a user installs (manifests/install.yaml, kubectl apply -k manifests/), with the components asked for applied as kustomize applies their JSON patches. */
function installedWebhooks(options: ModeOptions): Obj[] {
  const shipped = readYaml11('manifests/install.yaml').filter((o) => String(o['kind']).endsWith('WebhookConfiguration'));
  const patched = (component: string, o: Obj): Obj => {
    const file = o['kind'] === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating';
    const name = component === 'revision' ? `${file}-webhooks.yaml` : `${file}-webhook.yaml`;
    const ops = readYaml11(join('manifests/components', component, name))[0] as unknown as Operation[];
    return applyPatch(structuredClone(o), ops).newDocument;
  };
  return shipped.map((o) => {
    let c = o;
    if (options.revision !== undefined) c = patched('revision', c);
    if (options.required === true) c = patched('required', c);
    return c;
  });
}

/** Runs a scenario through kubeadmit with the configurations in `config` against the modes' server. */
export function admit(modes: Modes, config: string, scenario: Obj): Promise<Admission> {
  return kubeadmit({ binary, configs: [config], addr: modes.addr, ca: modes.caFile }, scenario as Scenario);
}

/** The stored pod without what differs by design: the generated name's random suffix, the webhook's status annotation. */
export function stored(res: Admission): Obj {
  const pod = structuredClone(res.object ?? {});
  delete pod['metadata']?.['name'];
  const annotations = pod['metadata']?.['annotations'];
  if (annotations !== undefined) {
    delete annotations[STATUS];
    if (Object.keys(annotations).length === 0) delete pod['metadata']['annotations'];
  }
  return pod;
}

/** One manifest opted in to each selection: the same outcome in both modes, and the same stored pod. */
export async function assertParity(modes: Modes, name: string, manifest: Obj, selections: readonly (readonly string[])[]): Promise<void> {
  // One at a time: the webhook's 5 s timeout is the installed one, and a loaded 2-core machine running
  // many kubeadmits at once can exceed it (failurePolicy Ignore then leaves the pod uninjected).
  for (const selection of selections) {
    {
      const view = admissionView(manifest, selection, DefaultNamespace);
      const scenario = { namespace: view.namespace, namespaces: { [view.namespace]: { labels: {} } }, object: view.pod };
      const [webhook, policy] = await Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);
      const what = `${name} with ${selection.join(',') || 'the defaults'}`;
      assert.equal(policy.allowed, webhook.allowed, `${what}: webhook ${webhook.reason ?? 'allowed'}; policies ${policy.reason ?? 'allowed'}`);
      if (!webhook.allowed) continue;
      assert.ok(webhook.object?.['metadata']?.['annotations']?.[STATUS] !== undefined, `${what}: the webhook injected`);
      const diff = differences(stored(policy), stored(webhook));
      assert.deepEqual(diff, [], `${what}: the policies' pod differs from the webhook's at ${diff.join('; ')}`);
    }
  }
}

/** Where two values differ, as JSON pointers with both values (policies, then webhook). */
export function differences(a: unknown, b: unknown, at = ''): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b))
    return [`${at}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].flatMap((k) => differences((a as Obj)[k], (b as Obj)[k], `${at}/${k}`));
}

export const SELECTIONS: readonly (readonly string[])[] = [[], ['proxy'], ['log-shipper', 'proxy'], ['proxy', 'log-shipper']];

/** A pod of `namespace` (labelled `namespaceLabels`) with these labels and annotations, created by a controller (generateName). */
export function scenarioOf(namespace: string, labels: Obj, annotations: Obj = {}, namespaceLabels: Obj = {}): Obj {
  return {
    namespace,
    namespaces: { [namespace]: { labels: namespaceLabels } },
    object: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'web-7d9f8b6c5-', labels: { app: 'web', ...labels }, ...(Object.keys(annotations).length > 0 && { annotations }) },
      spec: {
        containers: [{ name: 'app', image: 'nginx:1.27', volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
        volumes: [{ name: 'data', emptyDir: {} }],
      },
    },
  };
}

/**
 * One scenario through both modes: the same outcome, the same stored pod; `injected` says whether
 * the webhook must have injected it (its status annotation). Returns the webhook's admission.
 */
export async function assertSame(modes: Modes, what: string, scenario: Obj, injected: boolean): Promise<[Admission, Admission]> {
  const [webhook, policy] = await Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);
  assert.equal(policy.allowed, webhook.allowed, `${what}: webhook ${webhook.reason ?? 'allowed'}; policies ${policy.reason ?? 'allowed'}`);
  if (!webhook.allowed) return [webhook, policy];
  assert.equal(
    webhook.object?.['metadata']?.['annotations']?.[STATUS] !== undefined,
    injected,
    `${what}: the webhook ${injected ? 'injected' : 'left it alone'}`,
  );
  const diff = differences(stored(policy), stored(webhook));
  assert.deepEqual(diff, [], `${what}: the policies' pod differs from the webhook's at ${diff.join('; ')}`);
  return [webhook, policy];
}

/** The names and images of the containers the pod was given (init containers first), the app's aside. */
export function sidecarsOf(res: Admission): string[] {
  const spec = res.object?.['spec'] ?? {};
  return [...(spec['initContainers'] ?? []), ...(spec['containers'] ?? [])]
    .filter((c: Obj) => c['name'] !== 'app')
    .map((c: Obj) => `${c['name']}=${c['image']}`);
}
