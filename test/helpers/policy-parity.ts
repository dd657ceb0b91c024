import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createCA, issueServingCert } from '../../src/certs/pki.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { createLogger } from '../../src/log.js';
import { serve, type Running } from '../../src/main.js';
import { compilePolicies } from '../../src/policy/compile.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { admissionView } from '../corpus/admission-view.js';
import { DefaultNamespace, PodsDir, readYaml11 } from '../corpus/corpus.js';

/**
 * Parity of the two install modes through the kube-apiserver's own admission code (kubeadmit, its
 * MutatingAdmissionPolicy and ValidatingAdmissionPolicy plugins and its webhook plugins): for the
 * bundled templates, every example and a sample of the real-world corpus, the pod stored with the
 * compiled policies equals the pod stored with the webhook (the real server over TLS), except the
 * status annotation, which only the webhook writes. The validating policy refuses what /validate
 * refuses. kubeadmit: $KUBEADMIT, else ~/.cache/kubeadmit/kubeadmit (../shared/tools/kubeadmit/build.sh).
 */
export const KUBEADMIT_CACHE = join(homedir(), '.cache', 'kubeadmit', 'kubeadmit');
const named = process.env['KUBEADMIT'];
const binary = named !== undefined && named !== '' ? named : KUBEADMIT_CACHE;
export const skip = existsSync(binary) ? false : `kubeadmit not found (${binary}); run ../shared/tools/kubeadmit/build.sh once, or set KUBEADMIT to its binary`;

export const STATUS = 'sidecar-injector.io/status';
export const INJECT = 'sidecar-injector.io/inject';
const SERVICE_DNS = 'sidecar-injector.sidecar-injector.svc';

export type Obj = Record<string, any>;
export interface Admission {
  readonly allowed: boolean;
  readonly reason?: string;
  readonly object?: Obj;
  readonly calls: unknown[];
}

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
  close(): Promise<void>;
}

/** The real server serving `templates` over TLS for the Service's DNS name, and the policies the same templates compile to. */
export async function startModes(templates: string): Promise<Modes> {
  const dir = await mkdtemp(join(tmpdir(), 'policy-parity-'));
  const ca = await createCA('parity-ca', 1);
  const serving = await issueServingCert(ca, { dnsNames: [SERVICE_DNS], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  await writeFile(join(dir, 'tls.crt'), serving.certPem);
  await writeFile(join(dir, 'tls.key'), serving.keyPem);
  const caFile = join(dir, 'ca.crt');
  await writeFile(caFile, ca.certPem);
  const config = serveConfig(['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', dir, '--templates-dir', templates], {});
  const running: Running = await serve(config, createLogger('silent'));
  const list = (items: readonly unknown[]): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
  const write = async (name: string, items: readonly unknown[]): Promise<string> => {
    await writeFile(join(dir, name), list(items));
    return join(dir, name);
  };
  // The webhook configurations a user installs (manifests/install.yaml, kubectl apply -k manifests/).
  const shipped = readYaml11('manifests/install.yaml').filter((o) => String(o['kind']).endsWith('WebhookConfiguration'));
  const { objects } = compilePolicies(await loadTemplateSet(templates), { namespace: 'sidecar-injector' });
  return {
    dir,
    addr: `127.0.0.1:${running.port}`,
    caFile,
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
    close: async () => {
      await running.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function admit(modes: Modes, config: string, scenario: Obj): Promise<Admission> {
  const res = await admitOnce(modes, config, scenario);
  // kubeadmit's policy plugins answer this until their informers have synced, which a loaded machine
  // can delay past kubeadmit's own wait; an apiserver serves only once synced. Asked again then.
  if (res.reason?.endsWith('not yet ready to handle request') === true) return admitOnce(modes, config, scenario);
  return res;
}

async function admitOnce(modes: Modes, config: string, scenario: Obj): Promise<Admission> {
  const file = join(modes.dir, `scenario-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(file, JSON.stringify(scenario));
  try {
    const { stdout } = await promisify(execFile)(binary, ['--scenario', file, '--config', config, '--addr', modes.addr, '--ca', modes.caFile], {
      maxBuffer: 64 * 1024 * 1024,
    });
    return JSON.parse(stdout) as Admission;
  } finally {
    await rm(file, { force: true });
  }
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
