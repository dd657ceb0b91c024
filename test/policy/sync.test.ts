import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { createLogger } from '../../src/log.js';
import { start, type Injector } from '../../src/main.js';
import { compilePolicies } from '../../src/policy/compile.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { eventually, HOME, sct } from '../helpers/sidecartemplates.js';

/**
 * `serve --mode policy` against the API stand-in, the code path a Deployment runs: the templates
 * directory compiled to admission policies, each applied with server-side apply, the objects the
 * compile no longer makes pruned by this install's labels, readiness after the first sync.
 */

const NAMESPACE = 'sidecar-injector';
const LABELS = { 'app.kubernetes.io/managed-by': 'sidecar-injector', 'sidecar-injector.io/policies': 'default' };

interface PolicyServer {
  readonly injector: Injector;
  readonly healthUrl: string;
  /** The log lines written so far, parsed. */
  logs(): any[];
  close(): Promise<void>;
}

async function startPolicies(api: FakeApiServer, dir: string, flags: readonly string[] = []): Promise<PolicyServer> {
  const lines: string[] = [];
  const config = serveConfig(
    [
      '--mode',
      'policy',
      '--health-port',
      '0',
      '--host',
      '127.0.0.1',
      '--templates-dir',
      dir,
      '--templates-poll-seconds',
      '1',
      '--kubeconfig',
      api.kubeconfig,
      '--namespace',
      NAMESPACE,
      ...flags,
    ],
    {},
  );
  const injector = await start(config, createLogger('info', { write: (line: string) => void lines.push(line) }));
  return {
    injector,
    healthUrl: `http://127.0.0.1:${injector.healthPort}`,
    logs: () => lines.map((l) => JSON.parse(l)),
    close: () => injector.close(),
  };
}

async function templatesCopy(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'policy-sync-'));
  await cp('templates', dir, { recursive: true });
  return dir;
}

const ready = async (s: PolicyServer): Promise<number> => (await fetch(`${s.healthUrl}/readyz`)).status;
const metric = async (s: PolicyServer, series: string): Promise<number | undefined> => {
  const line = (await (await fetch(`${s.healthUrl}/metrics`)).text()).split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};
/** The stored object as it was applied: without what the apiserver adds to metadata. */
const applied = (obj: any): any => {
  const { uid: _u, generation: _g, resourceVersion: _r, managedFields: _m, ...metadata } = obj.metadata;
  return { ...obj, metadata };
};
const names = (api: FakeApiServer, kind: Parameters<FakeApiServer['policies']>[0]): string[] => api.policies(kind).map((o) => o.metadata.name);

describe('serve --mode policy', () => {
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });
  const track = <T extends { close(): Promise<void> }>(x: T): T => {
    closers.push(() => x.close());
    return x;
  };

  it('applies what the templates compile to with server-side apply, labelled for this install, and is ready only after that sync', async () => {
    const api = track(await startFakeApiServer());
    // RBAC without patch on the policies: the first sync cannot complete.
    api.grantOnly((method, path) => !(method === 'PATCH' && path.includes('admissionpolicies')));
    const dir = await templatesCopy();
    const server = track(await startPolicies(api, dir));
    await eventually(async () => ((await metric(server, 'sidecar_injector_policy_sync_failures_total{reason="forbidden"}')) ?? 0) >= 1, 'a failed sync');
    assert.equal(await ready(server), 503, 'not ready before the first complete sync');
    const refusal = server.logs().find((l) => l.level === 50);
    assert.equal(
      refusal.msg,
      "policies not synced: the injector may not patch mutatingadmissionpolicies.admissionregistration.k8s.io (403 Forbidden): give its ServiceAccount get, list, create, patch and delete on mutatingadmissionpolicies, mutatingadmissionpolicybindings, validatingadmissionpolicies and validatingadmissionpolicybindings (the chart's RBAC for mode policy and hybrid)",
    );
    api.grantOnly(undefined);
    await eventually(async () => (await ready(server)) === 200, 'ready once the retry synced');

    const expected = compilePolicies(await loadTemplateSet(dir), { namespace: NAMESPACE }).objects;
    const stored = [
      ...api.policies('MutatingAdmissionPolicy'),
      ...api.policies('MutatingAdmissionPolicyBinding'),
      ...api.policies('ValidatingAdmissionPolicy'),
      ...api.policies('ValidatingAdmissionPolicyBinding'),
    ];
    assert.equal(stored.length, expected.length);
    for (const want of expected as any[]) {
      const got = api.policy(want.kind, want.metadata.name);
      assert.ok(got, `${want.kind}/${want.metadata.name} stored`);
      assert.deepEqual(applied(got), { ...want, metadata: { ...want.metadata, labels: LABELS } }, `${want.kind}/${want.metadata.name} as compiled`);
      assert.equal(got.metadata.managedFields[0].manager, 'sidecar-injector');
    }
    const synced = server.logs().find((l) => l.msg === 'policies synced');
    assert.deepEqual(
      { compiled: synced.compiled, refused: synced.refused, applied: synced.applied, pruned: synced.pruned },
      { compiled: 2, refused: 0, applied: 12, pruned: 0 },
    );
    assert.equal(await metric(server, 'sidecar_injector_policies{state="compiled"}'), 2);
  });

  it('names create when RBAC grants patch but not create (an apply that creates the object needs both)', async () => {
    const api = track(await startFakeApiServer());
    api.grantOnly((method) => method !== 'CREATE');
    const server = track(await startPolicies(api, await templatesCopy()));
    await eventually(async () => server.logs().some((l) => l.level === 50), 'a failed sync');
    assert.match(
      server.logs().find((l) => l.level === 50).msg,
      /^policies not synced: the injector may not create mutatingadmissionpolicies\.admissionregistration\.k8s\.io \(403 Forbidden\)/,
    );
    assert.equal(await ready(server), 503);
  });

  it('changes the policy when its template is edited, and prunes the policy of a deleted template', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const server = track(await startPolicies(api, dir));
    await eventually(async () => (await ready(server)) === 200, 'first sync');
    const proxy = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    assert.ok(proxy.includes('envoyproxy/envoy:'));
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace(/envoyproxy\/envoy:[^\s"]+/, 'envoyproxy/envoy:v9.9.9'));
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy')?.metadata.generation === 2, 'the edit applied');
    assert.match(JSON.stringify(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy').spec), /envoy:v9\.9\.9/);

    await rm(join(dir, 'proxy.yaml'));
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy') === undefined, 'the deleted template pruned');
    assert.deepEqual(names(api, 'MutatingAdmissionPolicy'), ['sidecar-injector-log-shipper']);
    assert.deepEqual(names(api, 'MutatingAdmissionPolicyBinding'), ['sidecar-injector-log-shipper-namespace', 'sidecar-injector-log-shipper-pod']);
    // The validating policy no longer knows the template.
    assert.doesNotMatch(JSON.stringify(api.policy('ValidatingAdmissionPolicy', 'sidecar-injector-validate').spec), /"proxy"/);
    const last = server
      .logs()
      .filter((l) => l.msg === 'policies synced')
      .at(-1);
    assert.equal(last.pruned, 3);
  });

  it('keeps the policies when a template file breaks, and the last compiled version of a template that stops compiling', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const server = track(await startPolicies(api, dir));
    await eventually(async () => (await ready(server)) === 200, 'first sync');
    const before = api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy');
    const writes = api.policyWrites.length;
    const proxy = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace('containers:', 'contaners:'));
    await eventually(async () => server.logs().some((l) => l.level === 50 && /contaners/.test(JSON.stringify(l))), 'the broken file seen');
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(api.policyWrites.length, writes, 'nothing written or pruned for a broken file');
    assert.deepEqual(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy'), before);

    // Valid, but no longer compiles (overrides are the webhook's): the last compiled version keeps injecting.
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace(/\nspec:\n/, '\nspec:\n  overrides: [cpu]\n'));
    await eventually(async () => (await metric(server, 'sidecar_injector_policies{state="kept"}')) === 1, 'kept');
    assert.deepEqual(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy'), before);
    const warning = server.logs().find((l) => l.level === 40 && l.template === 'proxy');
    assert.equal(warning.kept, true);
    assert.match(warning.msg, /^template proxy no longer compiles to a policy: its last compiled version keeps injecting \(overrides \(cpu\)/);
  });

  it('prunes only objects with its own labels: another install and hand-made policies stay', async () => {
    const api = track(await startFakeApiServer());
    const other = (name: string, labels?: Record<string, string>): any => ({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingAdmissionPolicy',
      metadata: { name, ...(labels !== undefined && { labels }) },
      spec: { mutations: [] },
    });
    api.putPolicy(other('hand-made'));
    api.putPolicy(other('sidecar-injector-canary-proxy', { ...LABELS, 'sidecar-injector.io/policies': 'canary' }), 'sidecar-injector');
    // What an earlier sync of this install left: pruned.
    api.putPolicy(other('sidecar-injector-gone', LABELS), 'sidecar-injector');
    const server = track(await startPolicies(api, await templatesCopy()));
    await eventually(async () => (await ready(server)) === 200, 'first sync');
    assert.deepEqual(names(api, 'MutatingAdmissionPolicy'), [
      'hand-made',
      'sidecar-injector-canary-proxy',
      'sidecar-injector-log-shipper',
      'sidecar-injector-proxy',
    ]);
  });

  it('lets every replica sync: a second replica applies the same objects, no conflict, nothing changed', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const first = track(await startPolicies(api, dir));
    await eventually(async () => (await ready(first)) === 200, 'first replica synced');
    const writes = [...api.policyWrites];
    const second = track(await startPolicies(api, dir));
    await eventually(async () => (await ready(second)) === 200, 'second replica synced');
    assert.deepEqual(api.policyWrites, writes, 'the second replica changed nothing');
    assert.ok(
      api.calls.every((c) => c.status < 400 || c.method === 'GET'),
      'no refused write',
    );
  });

  it("compiles SidecarTemplate objects view by view, says per object whether it compiles in its Policy condition, and prunes a deleted object's policy", async () => {
    const api = track(await startFakeApiServer());
    api.applyTemplate(sct(HOME, 'mesh', 'registry.example.com/mesh:1.0'));
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/agent:1.0'));
    api.applyTemplate(sct('team-a', 'tuned', 'registry.example.com/tuned:1.0', { overrides: ['cpu'] }));
    const server = track(await startPolicies(api, 'templates', ['--templates-source', 'cluster']));
    await eventually(async () => (await ready(server)) === 200, 'listed and synced');
    assert.deepEqual(names(api, 'MutatingAdmissionPolicy'), ['sidecar-injector-mesh', 'sidecar-injector.ns.team-a.agent', 'sidecar-injector.ns.team-a.mesh']);
    const condition = (namespace: string, name: string): any => api.template(namespace, name)?.status?.conditions?.find((c: any) => c.type === 'Policy');
    await eventually(async () => condition('team-a', 'tuned') !== undefined, 'the conditions written');
    assert.deepEqual(
      [condition(HOME, 'mesh'), condition('team-a', 'agent')].map((c) => [c.status, c.reason, c.message]),
      [
        ['True', 'Compiled', 'injected by MutatingAdmissionPolicy sidecar-injector-mesh'],
        ['True', 'Compiled', 'injected by MutatingAdmissionPolicy sidecar-injector.ns.team-a.agent'],
      ],
    );
    const tuned = condition('team-a', 'tuned');
    assert.deepEqual([tuned.status, tuned.reason], ['False', 'NotCompiled']);
    assert.match(tuned.message, /^not compiled to a policy: overrides \(cpu\) are read from annotations/);
    // Loaded is still there beside it.
    assert.equal(api.template('team-a', 'tuned').status.conditions.find((c: any) => c.type === 'Loaded').status, 'True');

    api.deleteTemplate('team-a', 'agent');
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector.ns.team-a.agent') === undefined, 'pruned');
    assert.ok(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-mesh'), 'the cluster-wide policy stays');
  });

  it('writes MutatingAdmissionPolicy in v1beta1 where discovery says only v1beta1 serves it', async () => {
    const api = track(await startFakeApiServer());
    api.policyApi = 'v1beta1';
    const server = track(await startPolicies(api, await templatesCopy()));
    await eventually(async () => (await ready(server)) === 200, 'synced');
    assert.equal(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy').apiVersion, 'admissionregistration.k8s.io/v1beta1');
    assert.equal(api.policy('MutatingAdmissionPolicyBinding', 'sidecar-injector-proxy-pod').apiVersion, 'admissionregistration.k8s.io/v1beta1');
    assert.equal(api.policy('ValidatingAdmissionPolicy', 'sidecar-injector-validate').apiVersion, 'admissionregistration.k8s.io/v1');
  });

  it('says the same when --policy-api names a version the cluster does not serve (a 404)', async () => {
    const api = track(await startFakeApiServer());
    const server = track(await startPolicies(api, await templatesCopy(), ['--policy-api', 'v1beta1']));
    await eventually(async () => server.logs().some((l) => l.level === 50), 'a failed sync');
    assert.match(
      server.logs().find((l) => l.level === 50).msg,
      /^policies not synced: the cluster does not serve mutatingadmissionpolicies in admissionregistration\.k8s\.io\/v1beta1: admissionregistration\.k8s\.io\/v1 serves mutatingadmissionpolicies from Kubernetes 1\.36/,
    );
    assert.equal(await ready(server), 503);
  });

  it('says which Kubernetes versions serve the API when the cluster has none, and retries with a backoff, never in a loop', async () => {
    const api = track(await startFakeApiServer());
    api.policyApi = 'none';
    const server = track(await startPolicies(api, await templatesCopy()));
    await eventually(async () => server.logs().some((l) => l.level === 50), 'a failed sync');
    assert.equal(
      server.logs().find((l) => l.level === 50).msg,
      'policies not synced: the cluster does not serve mutatingadmissionpolicies in admissionregistration.k8s.io/v1 or v1beta1: admissionregistration.k8s.io/v1 serves mutatingadmissionpolicies from Kubernetes 1.36, v1beta1 in 1.34 and 1.35 with the beta API enabled (--runtime-config=admissionregistration.k8s.io/v1beta1=true), v1 serves validatingadmissionpolicies from 1.30; on an older cluster run --mode webhook',
    );
    // Retries after 1 s, 2 s, 4 s ...: at most 3 attempts in 3 s.
    await new Promise((r) => setTimeout(r, 3000));
    const failures = (await metric(server, 'sidecar_injector_policy_sync_failures_total{reason="not-served"}')) ?? 0;
    assert.ok(failures >= 2 && failures <= 3, `${failures} failed syncs in about 3 s`);
    assert.equal(await ready(server), 503);
    api.policyApi = 'v1';
    await eventually(async () => (await ready(server)) === 200, 'synced once the API is served', 30_000);
  });
});
