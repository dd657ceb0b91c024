import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { compilePolicies } from '../../src/policy/compile.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { startFakeApiServer } from '../helpers/fake-apiserver.js';
import { asApplied, NAMESPACE, POLICY_KINDS, policyNames, startPolicyInjector, templatesCopy } from '../helpers/policy-sync-lab.js';
import { eventually, HOME, sct } from '../helpers/sidecartemplates.js';

/**
 * `serve --mode policy` against the API stand-in, the code path a Deployment runs: the templates
 * directory compiled to admission policies, each applied with server-side apply, the objects the
 * compile no longer makes pruned by this install's labels, readiness after the first sync.
 */

const LABELS = { 'app.kubernetes.io/managed-by': 'sidecar-injector', 'sidecar-injector.io/policies': 'default' };

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
    const server = track(await startPolicyInjector(api, dir));
    await eventually(async () => ((await server.metric('sidecar_injector_policy_sync_failures_total{reason="forbidden"}')) ?? 0) >= 1, 'a failed sync');
    assert.equal(await server.ready(), 503, 'not ready before the first complete sync');
    const refusal = server.logs().find((l) => l.level === 50);
    assert.equal(
      refusal.msg,
      "policies not synced: the injector may not patch mutatingadmissionpolicies.admissionregistration.k8s.io (403 Forbidden): give its ServiceAccount get, list, create, patch and delete on mutatingadmissionpolicies, mutatingadmissionpolicybindings, validatingadmissionpolicies and validatingadmissionpolicybindings (the chart's RBAC for mode policy and hybrid)",
    );
    api.grantOnly(undefined);
    await eventually(async () => (await server.ready()) === 200, 'ready once the retry synced');

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
      assert.deepEqual(asApplied(got), { ...want, metadata: { ...want.metadata, labels: LABELS } }, `${want.kind}/${want.metadata.name} as compiled`);
      assert.equal(got.metadata.managedFields[0].manager, 'sidecar-injector');
    }
    const synced = server.logs().find((l) => l.msg === 'policies synced');
    assert.deepEqual(
      { compiled: synced.compiled, refused: synced.refused, applied: synced.applied, pruned: synced.pruned },
      { compiled: 2, refused: 0, applied: 12, pruned: 0 },
    );
    assert.equal(await server.metric('sidecar_injector_policies{state="compiled"}'), 2);
  });

  it('names create when RBAC grants patch but not create (an apply that creates the object needs both)', async () => {
    const api = track(await startFakeApiServer());
    api.grantOnly((method) => method !== 'CREATE');
    const server = track(await startPolicyInjector(api, await templatesCopy()));
    await eventually(async () => server.logs().some((l) => l.level === 50), 'a failed sync');
    assert.match(
      server.logs().find((l) => l.level === 50).msg,
      /^policies not synced: the injector may not create mutatingadmissionpolicies\.admissionregistration\.k8s\.io \(403 Forbidden\)/,
    );
    assert.equal(await server.ready(), 503);
  });

  it('changes the policy when its template is edited, and prunes the policy of a deleted template', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const server = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await server.ready()) === 200, 'first sync');
    const proxy = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    assert.ok(proxy.includes('envoyproxy/envoy:'));
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace(/envoyproxy\/envoy:[^\s"]+/, 'envoyproxy/envoy:v9.9.9'));
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy')?.metadata.generation === 2, 'the edit applied');
    assert.match(JSON.stringify(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy').spec), /envoy:v9\.9\.9/);

    await rm(join(dir, 'proxy.yaml'));
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy') === undefined, 'the deleted template pruned');
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), ['sidecar-injector-log-shipper']);
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicyBinding'), ['sidecar-injector-log-shipper-namespace', 'sidecar-injector-log-shipper-pod']);
    // The validating policy no longer knows the template.
    assert.doesNotMatch(JSON.stringify(api.policy('ValidatingAdmissionPolicy', 'sidecar-injector-validate').spec), /"proxy"/);
    // The line is written once the sync's last delete is answered, which the stand-in may show first.
    await eventually(async () => server.logs().some((l) => l.msg === 'policies synced' && l.pruned === 3), 'the prune logged');
  });

  it('keeps the policies when a template file breaks, and the last compiled version of a template that stops compiling', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const server = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await server.ready()) === 200, 'first sync');
    const before = api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy');
    const writes = api.policyWrites.length;
    const proxy = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace('containers:', 'contaners:'));
    await eventually(async () => server.logs().some((l) => l.level === 50 && /contaners/.test(JSON.stringify(l))), 'the broken file seen');
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(api.policyWrites.length, writes, 'nothing written or pruned for a broken file');
    assert.deepEqual(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy'), before);

    // Valid, but no longer compiles (image overrides are the webhook's): the last compiled version keeps injecting.
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace(/\nspec:\n/, '\nspec:\n  overrides: [image]\n'));
    await eventually(async () => (await server.metric('sidecar_injector_policies{state="kept"}')) === 1, 'kept');
    assert.deepEqual(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy'), before);
    const warning = server.logs().find((l) => l.level === 40 && l.template === 'proxy');
    assert.equal(warning.kept, true);
    assert.match(warning.msg, /^template proxy no longer compiles to a policy: its last compiled version keeps injecting \(overrides \(image\)/);
  });

  it('a restarted injector keeps the policies of a template that stopped compiling, from what the cluster holds', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const first = await startPolicyInjector(api, dir);
    await eventually(async () => (await first.ready()) === 200, 'first sync');
    await first.close();
    const before = POLICY_KINDS.map((k) => api.policies(k));
    const proxy = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    // Valid, but no longer compiles; the injector that compiled it is gone (a rollout).
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace(/\nspec:\n/, '\nspec:\n  overrides: [image]\n'));
    const writes = api.policyWrites.length;
    const restarted = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await restarted.ready()) === 200, 'the restarted injector synced');
    assert.deepEqual(
      api.policyWrites.slice(writes).filter((w) => w.startsWith('DELETE')),
      [],
      'nothing pruned',
    );
    assert.deepEqual(
      POLICY_KINDS.map((k) => api.policies(k)),
      before,
      'the proxy policy, its bindings and the validating policy that checks its containers, as they were',
    );
    assert.equal(await restarted.metric('sidecar_injector_policies{state="kept"}'), 1);
    assert.equal(restarted.logs().find((l) => l.level === 40 && l.template === 'proxy').kept, true);

    // The template deleted: now its policy goes.
    await rm(join(dir, 'proxy.yaml'));
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy') === undefined, 'pruned once the template is gone');
  });

  it('leaves the objects of a template that stopped compiling as they are when the spec its policy holds does not load', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const first = await startPolicyInjector(api, dir);
    await eventually(async () => (await first.ready()) === 200, 'first sync');
    await first.close();
    const policy = api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy');
    // A spec this version refuses (an unknown field), as a policy another version wrote.
    const annotations = { ...policy.metadata.annotations, 'sidecar-injector.io/template-source': JSON.stringify({ containers: [], sidecarz: true }) };
    api.putPolicy({ ...policy, metadata: { ...policy.metadata, annotations } }, 'sidecar-injector');
    const proxy = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace(/\nspec:\n/, '\nspec:\n  overrides: [image]\n'));
    const writes = api.policyWrites.length;
    const restarted = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await restarted.ready()) === 200, 'the restarted injector synced');
    assert.deepEqual(
      api.policyWrites.slice(writes).filter((w) => w.startsWith('DELETE')),
      [],
      'the policy and its bindings stay',
    );
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicyBinding'), [
      'sidecar-injector-log-shipper-namespace',
      'sidecar-injector-log-shipper-pod',
      'sidecar-injector-proxy-namespace',
      'sidecar-injector-proxy-pod',
    ]);
  });

  it('replicas with different template sets (a rollout, a ConfigMap reaching replicas at different times) keep what the cluster holds, and converge', async () => {
    const api = track(await startFakeApiServer());
    const older = await templatesCopy();
    const newer = await templatesCopy();
    const a = track(await startPolicyInjector(api, older));
    await eventually(async () => (await a.ready()) === 200, 'replica a synced');
    const before = POLICY_KINDS.map((k) => api.policies(k));
    // The newer set: proxy stops compiling, log-shipper is deleted.
    const proxy = await readFile(join(newer, 'proxy.yaml'), 'utf8');
    await writeFile(join(newer, 'proxy.yaml'), proxy.replace(/\nspec:\n/, '\nspec:\n  overrides: [image]\n'));
    await rm(join(newer, 'log-shipper.yaml'));
    const writes = api.policyWrites.length;
    const b = track(await startPolicyInjector(api, newer));
    await eventually(async () => (await b.ready()) === 200, 'replica b synced');
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), ['sidecar-injector-proxy'], 'b keeps proxy as compiled, prunes log-shipper');
    // Compiled from the version a compiled (its template-version), in the newer set's context (no more log-shipper).
    const version = (o: any): string => o.metadata.annotations['sidecar-injector.io/template-version'];
    assert.equal(
      version(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy')),
      version(before[0]!.find((o) => o.metadata.name === 'sidecar-injector-proxy')),
    );
    assert.ok(
      api
        .policy('ValidatingAdmissionPolicy', 'sidecar-injector-validate')
        .spec.validations.some((v: any) => v.reason === 'Forbidden' && v.expression.startsWith('!("proxy" in variables.selected)')),
      'the validating policy checks the kept proxy',
    );
    assert.ok(!api.policyWrites.slice(writes).some((w) => /DELETE .*proxy/.test(w)), 'nothing of proxy pruned');
    // a catches up with the newer set: the same objects, nothing written.
    const settled = POLICY_KINDS.map((k) => api.policies(k));
    await writeFile(join(older, 'proxy.yaml'), proxy.replace(/\nspec:\n/, '\nspec:\n  overrides: [image]\n'));
    await rm(join(older, 'log-shipper.yaml'));
    await eventually(async () => a.logs().filter((l) => l.msg === 'policies synced').length >= 2, 'replica a synced the newer set');
    assert.deepEqual(
      POLICY_KINDS.map((k) => api.policies(k)),
      settled,
    );
  });

  it('a sync refused half-way (the third apply) leaves every policy in place, prunes nothing, and converges on the retry', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const server = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await server.ready()) === 200, 'first sync');
    const before = POLICY_KINDS.map((k) => api.policies(k));
    let patches = 0;
    api.grantOnly((method, path) => !(method === 'PATCH' && path.includes('admissionpolic') && ++patches === 3));
    const proxy = await readFile(join(dir, 'proxy.yaml'), 'utf8');
    await writeFile(join(dir, 'proxy.yaml'), proxy.replace(/envoyproxy\/envoy:[^\s"]+/, 'envoyproxy/envoy:v9.9.9'));
    await rm(join(dir, 'log-shipper.yaml'));
    await eventually(async () => ((await server.metric('sidecar_injector_policy_sync_failures_total{reason="forbidden"}')) ?? 0) >= 1, 'the refused sync');
    // Two applies went through (the proxy policy and one binding); nothing was pruned.
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), ['sidecar-injector-log-shipper', 'sidecar-injector-proxy']);
    assert.deepEqual(api.policies('ValidatingAdmissionPolicy'), before[2], 'the validating policy as it was');
    assert.deepEqual(api.policies('MutatingAdmissionPolicyBinding').length, before[1]!.length);
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-log-shipper') === undefined, 'the retry converged');
    const expected = compilePolicies(await loadTemplateSet(dir), { namespace: NAMESPACE }).objects as any[];
    assert.deepEqual(POLICY_KINDS.flatMap((k) => policyNames(api, k)).sort(), expected.map((o) => o.metadata.name).sort());
    assert.match(JSON.stringify(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy').spec), /envoy:v9\.9\.9/);
  });

  it('a sync whose prune is cut off (the API refuses the second delete) keeps the working policies and finishes the prune on the retry', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const server = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await server.ready()) === 200, 'first sync');
    let deletes = 0;
    api.grantOnly((method, path) => !(method === 'DELETE' && path.includes('admissionpolic') && ++deletes === 2));
    await rm(join(dir, 'log-shipper.yaml'));
    await eventually(async () => ((await server.metric('sidecar_injector_policy_sync_failures_total{reason="forbidden"}')) ?? 0) >= 1, 'the cut-off sync');
    assert.ok(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy'), 'the proxy policy stays');
    assert.ok(api.policy('ValidatingAdmissionPolicy', 'sidecar-injector-validate'), 'the validating policy stays');
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector-log-shipper') === undefined, 'the retry pruned the rest');
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicyBinding'), ['sidecar-injector-proxy-namespace', 'sidecar-injector-proxy-pod']);
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
    const server = track(await startPolicyInjector(api, await templatesCopy()));
    await eventually(async () => (await server.ready()) === 200, 'first sync');
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), [
      'hand-made',
      'sidecar-injector-canary-proxy',
      'sidecar-injector-log-shipper',
      'sidecar-injector-proxy',
    ]);
  });

  it('lets every replica sync: a second replica applies the same objects, no conflict, nothing changed', async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    const first = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await first.ready()) === 200, 'first replica synced');
    const writes = [...api.policyWrites];
    const second = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await second.ready()) === 200, 'second replica synced');
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
    api.applyTemplate(sct('team-a', 'tuned', 'registry.example.com/tuned:1.0', { overrides: ['image'] }));
    const server = track(await startPolicyInjector(api, 'templates', ['--templates-source', 'cluster']));
    await eventually(async () => (await server.ready()) === 200, 'listed and synced');
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), [
      'sidecar-injector-mesh',
      'sidecar-injector.ns.team-a.agent',
      'sidecar-injector.ns.team-a.mesh',
    ]);
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
    assert.match(tuned.message, /^not compiled to a policy: overrides \(image\) are checked by the webhook/);
    // Loaded is still there beside it.
    assert.equal(api.template('team-a', 'tuned').status.conditions.find((c: any) => c.type === 'Loaded').status, 'True');

    api.deleteTemplate('team-a', 'agent');
    await eventually(async () => api.policy('MutatingAdmissionPolicy', 'sidecar-injector.ns.team-a.agent') === undefined, 'pruned');
    assert.ok(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-mesh'), 'the cluster-wide policy stays');
  });

  it('a restarted injector keeps the policies of SidecarTemplate objects that stopped compiling, in every view they are in', async () => {
    const api = track(await startFakeApiServer());
    api.applyTemplate(sct(HOME, 'mesh', 'registry.example.com/mesh:1.0'));
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/agent:1.0'));
    const first = await startPolicyInjector(api, 'templates', ['--templates-source', 'cluster']);
    await eventually(async () => (await first.ready()) === 200, 'listed and synced');
    await first.close();
    const before = POLICY_KINDS.map((k) => api.policies(k));
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), [
      'sidecar-injector-mesh',
      'sidecar-injector.ns.team-a.agent',
      'sidecar-injector.ns.team-a.mesh',
    ]);
    // Both stop compiling while no injector runs.
    api.applyTemplate(sct(HOME, 'mesh', 'registry.example.com/mesh:1.0', { overrides: ['image'] }));
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/agent:1.0', { overrides: ['image'] }));
    const restarted = track(await startPolicyInjector(api, 'templates', ['--templates-source', 'cluster']));
    await eventually(async () => (await restarted.ready()) === 200, 'the restarted injector synced');
    assert.deepEqual(
      POLICY_KINDS.map((k) => api.policies(k)),
      before,
      'every policy, binding and validating policy as it was',
    );
    assert.equal(await restarted.metric('sidecar_injector_policies{state="kept"}'), 2);
  });

  it("one tenant's template that does not compile never stops the sync: the other namespaces' policies are applied, its Policy condition says why", async () => {
    const api = track(await startFakeApiServer());
    api.applyTemplate(sct(HOME, 'mesh', 'registry.example.com/mesh:1.0'));
    // The CRD lets a null list item through; CEL has no null string.
    api.applyTemplate(sct('team-a', 'broken', 'registry.example.com/b:1', { containers: [{ name: 'broken', image: 'busybox:1.36', args: ['a', null] }] }));
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/agent:1.0'));
    api.applyTemplate(sct('team-b', 'agent', 'registry.example.com/agent:1.0'));
    const server = track(await startPolicyInjector(api, 'templates', ['--templates-source', 'cluster']));
    await eventually(async () => (await server.ready()) === 200, 'listed and synced');
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), [
      'sidecar-injector-mesh',
      'sidecar-injector.ns.team-a.agent',
      'sidecar-injector.ns.team-a.mesh',
      'sidecar-injector.ns.team-b.agent',
      'sidecar-injector.ns.team-b.mesh',
    ]);
    assert.equal((await server.metric('sidecar_injector_policy_sync_failures_total{reason="compile"}')) ?? 0, 0);
    const condition = (): any => api.template('team-a', 'broken')?.status?.conditions?.find((c: any) => c.type === 'Policy');
    await eventually(async () => condition() !== undefined, 'the condition written');
    assert.deepEqual([condition().status, condition().reason], ['False', 'NotCompiled']);
    assert.match(
      condition().message,
      /^not compiled to a policy: \/spec\/containers\/0\/args\/1: null has no CEL form in a policy: give it a value or remove it;/,
    );
    const warned = server.logs().find((l) => l.template === 'broken');
    assert.equal(warned.code, 'TEMPLATE_NOT_COMPILED');
  });

  it("judges each template in the view it is in: a name too long only in a namespace's view is warned about there, and its own templates by their names there", async () => {
    const api = track(await startFakeApiServer());
    // 220 characters: sidecar-injector-<name>-namespace has 247, sidecar-injector.ns.team-a.<name>-namespace 257.
    const wide = 'a'.repeat(220);
    const own = 'b'.repeat(220);
    api.applyTemplate(sct(HOME, wide, 'registry.example.com/w:1', { containers: [{ name: 'wide', image: 'registry.example.com/w:1' }] }));
    api.applyTemplate(sct('team-a', own, 'registry.example.com/o:1', { containers: [{ name: 'own', image: 'registry.example.com/o:1' }] }));
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/agent:1.0'));
    const server = track(await startPolicyInjector(api, 'templates', ['--templates-source', 'cluster']));
    await eventually(async () => (await server.ready()) === 200, 'listed and synced');
    assert.deepEqual(
      policyNames(api, 'MutatingAdmissionPolicy'),
      [`sidecar-injector-${wide}`, 'sidecar-injector.ns.team-a.agent'],
      'each compiles where its names fit',
    );
    const warned = (name: string): any => server.logs().find((l) => l.level === 40 && l.template === name);
    assert.match(
      warned(wide)?.msg ?? 'no warning',
      /^template a{220} does not compile to a policy in the view of namespace team-a: pods that select it are refused there \(\/metadata\/name: its objects would be named sidecar-injector\.ns\.team-a\.a{220}-namespace \(257 characters\)/,
    );
    assert.deepEqual(warned(wide).views, ['team-a']);
    assert.match(
      warned(own)?.msg ?? 'no warning',
      /^template b{220} does not compile to a policy: pods that select it are refused \(\/metadata\/name: its objects would be named sidecar-injector\.ns\.team-a\.b{220}-namespace \(257 characters\)/,
    );
  });

  it("judges each template by the names of this install's revision", async () => {
    const api = track(await startFakeApiServer());
    const dir = await templatesCopy();
    // 210 characters: sidecar-injector-<name>-namespace has 237, sidecar-injector.rev.canary.<name>-pod-ns-revision 254.
    const long = 'c'.repeat(210);
    await writeFile(
      join(dir, 'long.yaml'),
      JSON.stringify(sct(HOME, long, 'registry.example.com/l:1', { containers: [{ name: 'long', image: 'registry.example.com/l:1' }] })),
    );
    const server = track(await startPolicyInjector(api, dir, ['--revision', 'canary']));
    await eventually(async () => (await server.ready()) === 200, 'synced');
    assert.deepEqual(policyNames(api, 'MutatingAdmissionPolicy'), ['sidecar-injector.rev.canary.log-shipper', 'sidecar-injector.rev.canary.proxy']);
    assert.match(
      server.logs().find((l) => l.level === 40 && l.template === long)?.msg ?? 'no warning',
      /^template c{210} does not compile to a policy: pods that select it are refused \(\/metadata\/name: its objects would be named sidecar-injector\.rev\.canary\.c{210}-pod-ns-revision \(254 characters\)/,
    );
  });

  it('an object the apiserver refuses (422) is logged and counted, and every other object is applied; the sync completes', async () => {
    const api = track(await startFakeApiServer());
    const refused = 'sidecar-injector-log-shipper';
    api.invalidate((kind, name) =>
      kind === 'MutatingAdmissionPolicy' && name === refused ? 'spec.mutations[0].jsonPatch.expression: Invalid value: "...": compilation failed' : undefined,
    );
    const dir = await templatesCopy();
    const server = track(await startPolicyInjector(api, dir));
    await eventually(async () => (await server.ready()) === 200, 'synced');
    const expected = compilePolicies(await loadTemplateSet(dir), { namespace: NAMESPACE }).objects as any[];
    for (const want of expected)
      assert.equal(
        api.policy(want.kind, want.metadata.name) !== undefined,
        !(want.kind === 'MutatingAdmissionPolicy' && want.metadata.name === refused),
        want.metadata.name,
      );
    const line = server.logs().find((l) => l.level === 50);
    assert.equal(
      line.msg,
      `policy not applied: the apiserver refused MutatingAdmissionPolicy ${refused}: HTTP 422: MutatingAdmissionPolicy.admissionregistration.k8s.io "${refused}" is invalid: spec.mutations[0].jsonPatch.expression: Invalid value: "...": compilation failed; the other policies are applied, fix the template it is compiled from`,
    );
    assert.equal(await server.metric('sidecar_injector_policy_sync_failures_total{reason="refused"}'), 1);
    assert.equal((await server.metric('sidecar_injector_policy_sync_failures_total{reason="api"}')) ?? 0, 0);
    const synced = server.logs().find((l) => l.msg === 'policies synced');
    assert.deepEqual([synced.applied, synced.refusedObjects], [expected.length - 1, 1]);
  });

  it('writes MutatingAdmissionPolicy in v1beta1 where discovery says only v1beta1 serves it', async () => {
    const api = track(await startFakeApiServer());
    api.policyApi = 'v1beta1';
    const server = track(await startPolicyInjector(api, await templatesCopy()));
    await eventually(async () => (await server.ready()) === 200, 'synced');
    assert.equal(api.policy('MutatingAdmissionPolicy', 'sidecar-injector-proxy').apiVersion, 'admissionregistration.k8s.io/v1beta1');
    assert.equal(api.policy('MutatingAdmissionPolicyBinding', 'sidecar-injector-proxy-pod').apiVersion, 'admissionregistration.k8s.io/v1beta1');
    assert.equal(api.policy('ValidatingAdmissionPolicy', 'sidecar-injector-validate').apiVersion, 'admissionregistration.k8s.io/v1');
  });

  it('says the same when --policy-api names a version the cluster does not serve (a 404)', async () => {
    const api = track(await startFakeApiServer());
    const server = track(await startPolicyInjector(api, await templatesCopy(), ['--policy-api', 'v1beta1']));
    await eventually(async () => server.logs().some((l) => l.level === 50), 'a failed sync');
    assert.match(
      server.logs().find((l) => l.level === 50).msg,
      /^policies not synced: the cluster does not serve mutatingadmissionpolicies in admissionregistration\.k8s\.io\/v1beta1: admissionregistration\.k8s\.io\/v1 serves mutatingadmissionpolicies from Kubernetes 1\.36/,
    );
    assert.equal(await server.ready(), 503);
  });

  it('says which Kubernetes versions serve the API when the cluster has none, and retries with a backoff, never in a loop', async () => {
    const api = track(await startFakeApiServer());
    api.policyApi = 'none';
    const server = track(await startPolicyInjector(api, await templatesCopy()));
    await eventually(async () => server.logs().some((l) => l.level === 50), 'a failed sync');
    assert.equal(
      server.logs().find((l) => l.level === 50).msg,
      'policies not synced: the cluster does not serve mutatingadmissionpolicies in admissionregistration.k8s.io/v1 or v1beta1: admissionregistration.k8s.io/v1 serves mutatingadmissionpolicies from Kubernetes 1.36, v1beta1 in 1.34 and 1.35 with the beta API enabled (--runtime-config=admissionregistration.k8s.io/v1beta1=true), v1 serves validatingadmissionpolicies from 1.30; on an older cluster run --mode webhook',
    );
    // Retries after 1 s, 2 s, 4 s ...: at most 3 attempts in 3 s.
    await new Promise((r) => setTimeout(r, 3000));
    const failures = (await server.metric('sidecar_injector_policy_sync_failures_total{reason="not-served"}')) ?? 0;
    assert.ok(failures >= 2 && failures <= 3, `${failures} failed syncs in about 3 s`);
    assert.equal(await server.ready(), 503);
    api.policyApi = 'v1';
    await eventually(async () => (await server.ready()) === 200, 'synced once the API is served', 30_000);
  });
});
