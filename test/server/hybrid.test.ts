import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpsRequest } from '../helpers/client.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { admit, skip, stored, type Modes } from '../helpers/policy-parity.js';
import { asApplied, POLICY_KINDS, startHybridInjector, type HybridInjector } from '../helpers/policy-sync-lab.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { eventually, HOME, sct } from '../helpers/sidecartemplates.js';
import { readYaml11 } from '../corpus/corpus.js';

/**
 * serve --mode hybrid: the injector keeps the policies of the templates that compile in sync (the
 * API stand-in), and its webhook, over real TLS, injects and checks only the others; a template the
 * policies inject is still known to it (a pod may name it). Through kubeadmit, the policies the sync
 * wrote and the shipped webhook configurations together store a pod with every selected sidecar once.
 */

/** Per-pod image overrides are the webhook's: this template does not compile to a policy. */
const TUNED = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: tuned
spec:
  overrides: [image]
  containers:
    - name: tuned
      image: registry.example.com/tuned:1.0
      resources:
        requests: { cpu: 10m, memory: 16Mi }
`;

describe('serve --mode hybrid', () => {
  let api: FakeApiServer;
  let hybrid: HybridInjector;
  let dir: string;
  before(async () => {
    api = await startFakeApiServer();
    dir = await mkdtemp(join(tmpdir(), 'hybrid-'));
    await cp('templates', join(dir, 'templates'), { recursive: true });
    await writeFile(join(dir, 'templates', 'tuned.yaml'), TUNED);
    hybrid = await startHybridInjector(api, join(dir, 'templates'), { certDir: dir });
    await eventually(async () => (await hybrid.ready()) === 200, 'ready after the first sync');
    // Ready once the first sync has finished; this one completes (its validating policy is the last object applied).
    await eventually(async () => api.policy('ValidatingAdmissionPolicyBinding', 'sidecar-injector-validate-pod') !== undefined, 'the first sync applied');
  });
  after(async () => {
    await hybrid?.close();
    await api?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const review = async (path: string, pod: object): Promise<any> => {
    const res = await httpsRequest(`${hybrid.url}${path}`, JSON.stringify(podReview(pod, { namespace: 'shop' })), { ca: hybrid.ca });
    assert.equal(res.status, 200, res.text);
    return res.json().response;
  };
  const naming = (templates: string, spec?: object): any => optedInPod({ annotations: { 'sidecar-injector.io/templates': templates }, ...(spec && { spec }) });

  it('syncs a policy for each template that compiles, and a validating policy that leaves the others to the webhook', () => {
    assert.deepEqual(
      api.policies('MutatingAdmissionPolicy').map((p) => p.metadata.name),
      ['sidecar-injector-log-shipper', 'sidecar-injector-proxy'],
    );
    const validations = JSON.stringify(api.policy('ValidatingAdmissionPolicy', 'sidecar-injector-validate').spec.validations);
    assert.doesNotMatch(validations, /injected by the webhook only/);
    assert.match(validations, /known templates: log-shipper, proxy, tuned/, 'tuned is a known template');
  });

  it('/mutate injects only the templates the policies do not, and leaves a pod that selects only theirs as it is', async () => {
    const both = await review('/mutate', naming('proxy,tuned'));
    assert.equal(both.allowed, true);
    const added = decodePatch(both).filter((op: any) => op.op === 'add' && /^\/spec\/(init)?[cC]ontainers/.test(op.path));
    assert.deepEqual(
      added.map((op: any) => op.value.name),
      ['tuned'],
    );
    const status = decodePatch(both).find((op: any) => op.path.startsWith('/metadata/annotations'));
    assert.match(JSON.stringify(status.value), /tuned/);
    assert.doesNotMatch(JSON.stringify(status.value), /proxy/);

    const policyOnly = await review('/mutate', naming('proxy'));
    assert.equal(policyOnly.allowed, true);
    assert.equal(policyOnly.patch, undefined);
    // The defaults (log-shipper) are the policies' too.
    assert.equal((await review('/mutate', optedInPod())).patch, undefined);
    // Still known: a misspelt name is refused as before, naming the known ones.
    const unknown = await review('/mutate', naming('proxxy'));
    assert.equal(unknown.allowed, false);
    assert.match(unknown.status.message, /unknown sidecar template\(s\) "proxxy".*known templates: log-shipper, proxy, tuned/);
  });

  it('/validate checks only the templates the policies do not', async () => {
    const app = { name: 'web', image: 'nginx:1.27' };
    const tuned = { name: 'tuned', image: 'registry.example.com/tuned:1.0' };
    // No proxy (the validating policy's to check), but tuned: allowed.
    assert.equal((await review('/validate', naming('proxy,tuned', { containers: [app, tuned] }))).allowed, true);
    assert.equal((await review('/validate', naming('proxy', { containers: [app] }))).allowed, true);
    const missing = await review('/validate', naming('proxy,tuned', { containers: [app] }));
    assert.equal(missing.allowed, false);
    assert.match(missing.status.message, /container "tuned"/);
    assert.doesNotMatch(missing.status.message, /proxy/);
  });

  it('stores a pod with every selected sidecar once: the synced policies and the webhook through kubeadmit', { skip }, async () => {
    const synced = POLICY_KINDS.flatMap((k) => api.policies(k).map(asApplied));
    const webhooks = readYaml11('manifests/install.yaml').filter((o) => String(o['kind']).endsWith('WebhookConfiguration'));
    const config = join(dir, 'hybrid.json');
    await writeFile(config, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...synced, ...webhooks] }));
    const modes = { dir, addr: `127.0.0.1:${hybrid.injector.port}`, caFile: join(dir, 'ca.crt') } as Modes;
    const scenario = (pod: object): object => ({ namespace: 'shop', namespaces: { shop: { labels: {} } }, object: pod });

    const res = await admit(modes, config, scenario(naming('proxy,tuned')));
    assert.equal(res.allowed, true, res.reason);
    const pod = stored(res);
    const all = [...(pod['spec']['initContainers'] ?? []), ...pod['spec']['containers']].map((c: any) => c.name);
    assert.deepEqual(all.sort(), ['proxy', 'tuned', 'web']);
    assert.deepEqual(JSON.parse(res.object!['metadata']['annotations']['sidecar-injector.io/status']).templates, ['tuned']);

    // The default template is the policies': injected once, and the webhook writes no status for a pod it left alone.
    const defaults = await admit(modes, config, scenario(optedInPod()));
    assert.equal(defaults.allowed, true, defaults.reason);
    assert.deepEqual(
      defaults.object!['spec']['containers'].map((c: any) => c.name),
      ['web', 'log-shipper'],
    );
    assert.equal(defaults.object!['metadata']['annotations']?.['sidecar-injector.io/status'], undefined);
  });
  // Last: it changes the templates the other tests read.
  it('hands a template that stops compiling to the webhook: its policies are pruned and /mutate injects it', async () => {
    const file = join(dir, 'templates', 'proxy.yaml');
    await writeFile(file, (await readFile(file, 'utf8')).replace(/\nspec:\n/, '\nspec:\n  overrides: [image]\n'));
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy') === undefined, 'the proxy policy pruned');
    // Its bindings went first.
    assert.equal(api.policy('MutatingAdmissionPolicyBinding', 'sidecar-injector-proxy-pod'), undefined);
    assert.equal(api.policy('MutatingAdmissionPolicyBinding', 'sidecar-injector-proxy-namespace'), undefined);
    const res = await review('/mutate', naming('proxy'));
    assert.equal(res.allowed, true);
    // The pod has no initContainers: the list is added whole.
    const init = decodePatch(res).find((op: any) => op.path === '/spec/initContainers');
    assert.deepEqual(
      init.value.map((c: any) => c.name),
      ['proxy'],
    );
  });
});

describe('serve --mode hybrid: readiness', () => {
  it('is ready once the first sync has finished, even failed, and the webhook then injects every template itself, until a sync completes', async () => {
    const api = await startFakeApiServer();
    try {
      // RBAC without the policy kinds: no sync can complete.
      api.grantOnly((_method, path) => !path.includes('admissionpolicies'));
      const hybrid = await startHybridInjector(api, 'templates');
      try {
        await eventually(
          async () => ((await hybrid.metric('sidecar_injector_policy_sync_failures_total{reason="forbidden"}')) ?? 0) >= 1,
          'the first sync failed',
        );
        await eventually(async () => (await hybrid.ready()) === 200, 'ready after the failed first sync');
        assert.equal(api.policies('MutatingAdmissionPolicy').length, 0);
        // The pods of one ReplicaSet: the same pod, a fresh uid each time; from the third on the answer cache answers.
        const proxied = async (): Promise<boolean> => {
          const res = await httpsRequest(
            `${hybrid.url}/mutate`,
            JSON.stringify(podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }), { namespace: 'shop' })),
            { ca: hybrid.ca },
          );
          const added = decodePatch(res.json().response).filter((op: any) => op.op === 'add' && /^\/spec\/(init)?[cC]ontainers/.test(op.path));
          return added.some((op: any) => op.value.name === 'proxy' || JSON.stringify(op.value).includes('"name":"proxy"'));
        };
        for (let i = 0; i < 3; i++) assert.equal(await proxied(), true, 'the webhook injects proxy itself');

        // once a sync completes, the policies hold proxy: no answer kept from before says otherwise.
        api.grantOnly(undefined);
        await eventually(async () => hybrid.logs().some((l) => l.msg === 'policies synced'), 'a sync completed');
        assert.ok(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy'));
        assert.equal(await proxied(), false, 'left to the proxy policy');
      } finally {
        await hybrid.close();
      }
    } finally {
      await api.close();
    }
  });
});

describe('serve --mode hybrid: per view', () => {
  let api: FakeApiServer;
  let hybrid: HybridInjector;
  // 220 characters: its cluster-wide objects' names fit (sidecar-injector-<name>-namespace, 247), team-a's do not (257).
  const wide = 'w'.repeat(220);
  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct(HOME, wide, 'registry.example.com/wide:1', { containers: [{ name: 'wide', image: 'registry.example.com/wide:1' }] }));
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/agent:1'));
    api.applyTemplate(sct('team-b', 'agent', 'registry.example.com/agent:1'));
    api.invalidate((kind, name) =>
      kind === 'MutatingAdmissionPolicy' && name === 'sidecar-injector.ns.team-b.agent' ? 'spec.mutations[0]: Invalid value' : undefined,
    );
    hybrid = await startHybridInjector(api, 'templates', { flags: ['--templates-source', 'cluster'] });
    await eventually(async () => (await hybrid.ready()) === 200, 'ready after the first sync');
    await eventually(async () => hybrid.logs().some((l) => l.msg === 'policies synced'), 'the first sync completed');
  });
  after(async () => {
    await hybrid?.close();
    await api?.close();
  });

  const injected = async (namespace: string, templates: string): Promise<string[]> => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': templates } });
    const res = await httpsRequest(`${hybrid.url}/mutate`, JSON.stringify(podReview(pod, { namespace })), { ca: hybrid.ca });
    assert.equal(res.status, 200, res.text);
    const answer = res.json().response;
    assert.equal(answer.allowed, true, JSON.stringify(answer.status));
    return decodePatch(answer)
      .filter((op: any) => op.op === 'add' && /^\/spec\/(init)?[cC]ontainers/.test(op.path))
      .flatMap((op: any) => (Array.isArray(op.value) ? op.value : [op.value]).map((c: any) => c.name));
  };

  it('injects a cluster-wide template in a namespace whose view has no policy for it (its names too long there), and leaves it to the cluster-wide policy elsewhere', async () => {
    assert.ok(api.policy('MutatingAdmissionPolicy', `sidecar-injector-${wide}`), 'the cluster-wide policy exists');
    assert.deepEqual(await injected('team-a', wide), ['wide']);
    assert.deepEqual(await injected('shop', wide), []);
  });

  it("keeps a namespace's answers through a sync for another namespace's change", async () => {
    const hits = async (): Promise<number> => (await hybrid.metric('sidecar_injector_answer_cache_lookups_total{endpoint="mutate",result="hit"}')) ?? 0;
    // The pods of one ReplicaSet in shop: from the third on the answer cache answers.
    for (let i = 0; i < 3; i++) await injected('shop', wide);
    const before = await hits();
    assert.ok(before >= 1, 'a hit in shop');
    const synced = hybrid.logs().filter((l) => l.msg === 'policies synced').length;
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/agent:2'));
    await eventually(async () => hybrid.logs().filter((l) => l.msg === 'policies synced').length > synced, "a sync for team-a's change");
    await injected('shop', wide);
    assert.equal(await hits(), before + 1, "shop's kept answer still answers");
  });

  it('injects a template whose policy the apiserver refused in that view, and leaves it to the policy where it exists', async () => {
    assert.equal(api.policy('MutatingAdmissionPolicy', 'sidecar-injector.ns.team-b.agent'), undefined, 'refused');
    assert.deepEqual(await injected('team-b', 'agent'), ['agent']);
    assert.deepEqual(await injected('team-a', 'agent'), []);
  });
});
