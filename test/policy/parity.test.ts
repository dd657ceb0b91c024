import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createCA, issueServingCert } from '../../src/certs/pki.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/log.js';
import { serve, type Running } from '../../src/main.js';
import { compilePolicies } from '../../src/policy/compile.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { admissionView } from '../corpus/admission-view.js';
import { DefaultNamespace, PodsDir, readYaml11, SidecarsDir } from '../corpus/corpus.js';

/**
 * Parity of the two install modes through the kube-apiserver's own admission code (kubeadmit, its
 * MutatingAdmissionPolicy and ValidatingAdmissionPolicy plugins and its webhook plugins): for the
 * bundled templates, every example and a sample of the real-world corpus, the pod stored with the
 * compiled policies equals the pod stored with the webhook (the real server over TLS), except the
 * status annotation, which only the webhook writes. The validating policy refuses what /validate
 * refuses. kubeadmit: $KUBEADMIT, else ~/.cache/kubeadmit/kubeadmit (../shared/tools/kubeadmit/build.sh).
 */
const KUBEADMIT_CACHE = join(homedir(), '.cache', 'kubeadmit', 'kubeadmit');
const named = process.env['KUBEADMIT'];
const binary = named !== undefined && named !== '' ? named : KUBEADMIT_CACHE;
const skip = existsSync(binary) ? false : `kubeadmit not found (${binary}); run ../shared/tools/kubeadmit/build.sh once, or set KUBEADMIT to its binary`;

const STATUS = 'sidecar-injector.io/status';
const INJECT = 'sidecar-injector.io/inject';
const SERVICE_DNS = 'sidecar-injector.sidecar-injector.svc';

type Obj = Record<string, any>;
interface Admission {
  readonly allowed: boolean;
  readonly reason?: string;
  readonly object?: Obj;
  readonly calls: unknown[];
}

/** Every example, and every eighth corpus manifest (the Jobs and CronJobs always). */
function pods(): { name: string; manifest: Obj }[] {
  const out = ['examples/pod.yaml', 'examples/deployment.yaml'].map((f) => ({ name: f, manifest: readYaml11(f)[0]! }));
  const files = readdirSync(PodsDir).sort();
  files.forEach((f, i) => {
    if (i % 8 === 0 || /job/.test(f)) out.push({ name: f, manifest: readYaml11(join(PodsDir, f))[0]! });
  });
  return out;
}

interface Modes {
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
async function startModes(templates: string): Promise<Modes> {
  const dir = await mkdtemp(join(tmpdir(), 'policy-parity-'));
  const ca = await createCA('parity-ca', 1);
  const serving = await issueServingCert(ca, { dnsNames: [SERVICE_DNS], ipAddresses: ['127.0.0.1'], validityDays: 1 });
  await writeFile(join(dir, 'tls.crt'), serving.certPem);
  await writeFile(join(dir, 'tls.key'), serving.keyPem);
  const caFile = join(dir, 'ca.crt');
  await writeFile(caFile, ca.certPem);
  const config = loadConfig(['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', dir, '--templates-dir', templates], {});
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
    validatingWebhook: await write('validating-webhook.json', shipped.filter((c) => c['kind'] === 'ValidatingWebhookConfiguration')),
    policies: await write('policies.json', objects),
    validatingPolicy: await write('validating-policy.json', objects.filter((o) => String(o['kind']).startsWith('Validating'))),
    close: async () => {
      await running.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function admit(modes: Modes, config: string, scenario: Obj): Promise<Admission> {
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
    const { stdout } = await promisify(execFile)(binary, ['--scenario', file, '--config', config, '--addr', modes.addr, '--ca', modes.caFile], { maxBuffer: 64 * 1024 * 1024 });
    return JSON.parse(stdout) as Admission;
  } finally {
    await rm(file, { force: true });
  }
}

/** The stored pod without what differs by design: the generated name's random suffix, the webhook's status annotation. */
function stored(res: Admission): Obj {
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
async function assertParity(modes: Modes, name: string, manifest: Obj, selections: readonly (readonly string[])[]): Promise<void> {
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
function differences(a: unknown, b: unknown, at = ''): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return [`${at}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].flatMap((k) => differences((a as Obj)[k], (b as Obj)[k], `${at}/${k}`));
}

const SELECTIONS: readonly (readonly string[])[] = [[], ['proxy'], ['log-shipper', 'proxy'], ['proxy', 'log-shipper']];

describe('policy mode stores the pods webhook mode stores (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('templates');
  });
  after(async () => modes?.close());
  const both = (scenario: Obj): Promise<[Admission, Admission]> => Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);

  for (const { name, manifest } of pods()) {
    it(`${name}: the same pod for each selection of the bundled templates`, () => assertParity(modes, name, manifest, SELECTIONS));
  }

  it('a pod of an opted-in namespace without the label gets the same sidecars; one labelled "no" gets none in either mode', async () => {
    const pod = (labels: Obj): Obj => ({ apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'web-7d9f8b6c5-', labels }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] } });
    for (const labels of [{}, { [INJECT]: 'true' }, { [INJECT]: 'no' }, { [INJECT]: 'false' }]) {
      const [webhook, policy] = await both({ namespace: 'shop', namespaces: { shop: { labels: { [INJECT]: 'true' } } }, object: pod(labels) });
      assert.equal(webhook.allowed && policy.allowed, true);
      assert.deepEqual(stored(policy), stored(webhook), JSON.stringify(labels));
    }
    for (const namespace of ['kube-system', 'sidecar-injector']) {
      const [webhook, policy] = await both({ namespace, namespaces: { [namespace]: { labels: { [INJECT]: 'true' } } }, object: pod({ [INJECT]: 'true' }) });
      assert.deepEqual(stored(policy), stored(webhook), namespace);
      assert.equal(policy.object?.['spec']?.['containers']?.length, 1, `${namespace} is never injected`);
    }
  });

  it('reinvocation and a pod that already has its sidecars change nothing more', async () => {
    const view = admissionView(readYaml11('examples/deployment.yaml')[0]!, ['log-shipper', 'proxy'], 'shop');
    const first = await admit(modes, modes.policies, { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: view.pod });
    assert.equal(first.allowed, true, first.reason);
    const again = structuredClone(first.object!);
    delete again['metadata']['name'];
    const interloper = [{ patch: [{ op: 'add', path: '/metadata/labels/touched', value: 'yes' }] }];
    const second = await admit(modes, modes.policies, { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: again, interlopers: interloper });
    assert.equal(second.allowed, true, second.reason);
    const expected = structuredClone(again);
    expected['metadata']['labels']['touched'] = 'yes';
    assert.deepEqual(stored(second), stored({ ...second, object: expected }));
  });

  it('the validating policy refuses what /validate refuses: an opted-in pod without its sidecars, an unknown template', async () => {
    const cases: [string, Obj][] = [];
    for (const selection of SELECTIONS) cases.push([`without ${selection.join(',') || 'the defaults'}`, admissionView(readYaml11('examples/deployment.yaml')[0]!, selection, 'shop').pod]);
    const job = readdirSync(PodsDir).find((f) => f === 'istio-job.yaml')!;
    cases.push(['a Job pod without its native sidecar', admissionView(readYaml11(join(PodsDir, job))[0]!, ['log-shipper'], 'shop').pod]);
    cases.push(['an unknown template', admissionView(readYaml11('examples/pod.yaml')[0]!, ['log-shiper'], 'shop').pod]);
    for (const [what, pod] of cases) {
      const scenario = { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: pod };
      const [webhook, policy] = await Promise.all([admit(modes, modes.validatingWebhook, scenario), admit(modes, modes.validatingPolicy, scenario)]);
      assert.equal(webhook.allowed, false, `${what}: /validate refuses`);
      assert.equal(policy.allowed, false, `${what}: the validating policy refuses`);
      assert.match(policy.reason ?? '', /ValidatingAdmissionPolicy 'sidecar-injector-validate' with binding 'sidecar-injector-validate-pod' denied request: (pod opted in to sidecar injection but is missing: |unknown sidecar template)/, what);
    }
    // And what the mutating policies stored passes it, as what /mutate stored passes /validate (the parity cases above ran both).
  });
});

/** The real-world sidecars of the corpus (Istio, Linkerd, Vault, Datadog, ...), each alone and two together, on a sample of the corpus. */
describe('policy mode stores the pods webhook mode stores, with the corpus sidecars (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes(SidecarsDir);
  });
  after(async () => modes?.close());
  const names = readdirSync(SidecarsDir).map((f) => f.replace(/\.yaml$/, ''));
  const selections = [...names.map((n) => [n]), [names[0]!, names[1]!], [names[3]!, names[6]!]];
  for (const { name, manifest } of pods().filter((_, i) => i % 5 === 0)) {
    it(`${name}: the same pod for each corpus sidecar`, () => assertParity(modes, name, manifest, selections));
  }

  it("the one known difference: a pod that already has an earlier template's init containers gets a later template's behind them, not ahead", async () => {
    const manifest = readYaml11(join(PodsDir, 'istio-hello-injected.yaml'))[0]!;
    const view = admissionView(manifest, ['istio-proxy', 'vault-agent'], DefaultNamespace);
    const scenario = { namespace: view.namespace, namespaces: { [view.namespace]: { labels: {} } }, object: view.pod };
    const [webhook, policy] = await Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);
    assert.equal(webhook.allowed && policy.allowed, true);
    const names = (res: Admission): string[] => (stored(res)['spec']['initContainers'] as Obj[]).map((c) => c['name']);
    assert.deepEqual(names(webhook), ['vault-agent-init', 'istio-init', 'istio-proxy']);
    assert.deepEqual(names(policy), ['istio-init', 'istio-proxy', 'vault-agent-init']);
    const sorted = (res: Admission): Obj => {
      const pod = stored(res);
      pod['spec']['initContainers'] = [...pod['spec']['initContainers']].sort((a: Obj, b: Obj) => a['name'].localeCompare(b['name']));
      return pod;
    };
    assert.deepEqual(differences(sorted(policy), sorted(webhook)), [], 'the same pod but the order of the init containers');
  });
});

/** Placement next to a named container, placeholders of every kind (test/fixtures/policy/placement/). */
describe('policy mode stores the pods webhook mode stores, with placement before and after a container (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('test/fixtures/policy/placement');
  });
  after(async () => modes?.close());
  const pod = (containers: readonly string[]): Obj => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-0', labels: { app: 'web' } },
    spec: { serviceAccountName: 'builder', containers: containers.map((name) => ({ name, image: 'nginx:1.27' })) },
  });
  const selections = [[], ['ahead'], ['ahead', 'behind', 'tail'], ['tail', 'behind', 'ahead'], ['behind', 'ahead']];
  for (const containers of [['app'], ['init', 'app', 'exporter'], ['worker']]) {
    it(`a pod with containers ${containers.join(', ')}`, () => assertParity(modes, containers.join(','), pod(containers), selections));
  }
});
