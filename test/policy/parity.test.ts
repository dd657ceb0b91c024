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
import { DefaultNamespace, PodsDir, readYaml11 } from '../corpus/corpus.js';

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

const SELECTIONS: readonly (readonly string[])[] = [[], ['proxy'], ['log-shipper', 'proxy'], ['proxy', 'log-shipper']];

describe('policy mode stores the pods webhook mode stores (kubeadmit)', { skip }, () => {
  let dir: string;
  let running: Running;
  let caFile: string;
  let webhooks: string;
  let validatingWebhook: string;
  let policies: string;
  let validatingPolicy: string;
  let addr: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'policy-parity-'));
    const ca = await createCA('parity-ca', 1);
    const serving = await issueServingCert(ca, { dnsNames: [SERVICE_DNS], ipAddresses: ['127.0.0.1'], validityDays: 1 });
    await writeFile(join(dir, 'tls.crt'), serving.certPem);
    await writeFile(join(dir, 'tls.key'), serving.keyPem);
    caFile = join(dir, 'ca.crt');
    await writeFile(caFile, ca.certPem);
    const config = loadConfig(['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', dir, '--templates-dir', 'templates'], {});
    running = await serve(config, createLogger('silent'));
    addr = `127.0.0.1:${running.port}`;
    const list = (items: readonly unknown[]): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
    // The webhook configurations a user installs (manifests/install.yaml, kubectl apply -k manifests/).
    const shipped = readYaml11('manifests/install.yaml').filter((o) => String(o['kind']).endsWith('WebhookConfiguration'));
    webhooks = join(dir, 'webhooks.json');
    await writeFile(webhooks, list(shipped));
    validatingWebhook = join(dir, 'validating-webhook.json');
    await writeFile(validatingWebhook, list(shipped.filter((c) => c.kind === 'ValidatingWebhookConfiguration')));
    const { objects } = compilePolicies(await loadTemplateSet('templates'), { namespace: 'sidecar-injector' });
    policies = join(dir, 'policies.json');
    await writeFile(policies, list(objects));
    validatingPolicy = join(dir, 'validating-policy.json');
    await writeFile(validatingPolicy, list(objects.filter((o) => String(o['kind']).startsWith('Validating'))));
  });
  after(async () => {
    await running?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  async function admit(config: string, scenario: Obj): Promise<Admission> {
    const file = join(dir, `scenario-${Math.random().toString(36).slice(2)}.json`);
    await writeFile(file, JSON.stringify(scenario));
    try {
      const { stdout } = await promisify(execFile)(binary, ['--scenario', file, '--config', config, '--addr', addr, '--ca', caFile], { maxBuffer: 64 * 1024 * 1024 });
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

  async function both(scenario: Obj): Promise<[Admission, Admission]> {
    return Promise.all([admit(webhooks, scenario), admit(policies, scenario)]);
  }

  for (const { name, manifest } of pods()) {
    it(`${name}: the same pod for each selection of the bundled templates`, async () => {
      for (const selection of SELECTIONS) {
        const view = admissionView(manifest, selection, DefaultNamespace);
        const scenario = { namespace: view.namespace, namespaces: { [view.namespace]: { labels: {} } }, object: view.pod };
        const [webhook, policy] = await both(scenario);
        const what = `${name} with ${selection.join(',') || 'the defaults'}`;
        assert.equal(policy.allowed, webhook.allowed, `${what}: webhook ${webhook.reason ?? 'allowed'}; policies ${policy.reason ?? 'allowed'}`);
        if (!webhook.allowed) continue;
        assert.ok(webhook.object?.['metadata']?.['annotations']?.[STATUS] !== undefined, `${what}: the webhook injected`);
        assert.deepEqual(stored(policy), stored(webhook), what);
      }
    });
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
    const first = await admit(policies, { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: view.pod });
    assert.equal(first.allowed, true, first.reason);
    const again = structuredClone(first.object!);
    delete again['metadata']['name'];
    const interloper = [{ patch: [{ op: 'add', path: '/metadata/labels/touched', value: 'yes' }] }];
    const second = await admit(policies, { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: again, interlopers: interloper });
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
      const [webhook, policy] = await Promise.all([admit(validatingWebhook, scenario), admit(validatingPolicy, scenario)]);
      assert.equal(webhook.allowed, false, `${what}: /validate refuses`);
      assert.equal(policy.allowed, false, `${what}: the validating policy refuses`);
      assert.match(policy.reason ?? '', /ValidatingAdmissionPolicy 'sidecar-injector-validate' with binding 'sidecar-injector-validate-pod' denied request: (pod opted in to sidecar injection but is missing: |unknown sidecar template)/, what);
    }
    // And what the mutating policies stored passes it, as what /mutate stored passes /validate (the parity cases above ran both).
  });
});
