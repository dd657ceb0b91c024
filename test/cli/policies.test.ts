import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { cli } from '../helpers/cli.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { HOME, sct } from '../helpers/sidecartemplates.js';

describe('policies and lint --policies', () => {
  it('prints a MutatingAdmissionPolicy and two bindings per bundled template, and the validating policy with its bindings; exit 0', async () => {
    const r = await cli(['policies', 'templates', '-o', 'json']);
    assert.equal(r.code, 0, r.err);
    const kinds = (JSON.parse(r.out) as { items: { kind: string; metadata: { name: string } }[] }).items.map((o) => `${o.kind}/${o.metadata.name}`);
    assert.deepEqual(kinds, [
      'MutatingAdmissionPolicy/sidecar-injector-log-shipper',
      'MutatingAdmissionPolicyBinding/sidecar-injector-log-shipper-pod',
      'MutatingAdmissionPolicyBinding/sidecar-injector-log-shipper-namespace',
      'MutatingAdmissionPolicy/sidecar-injector-proxy',
      'MutatingAdmissionPolicyBinding/sidecar-injector-proxy-pod',
      'MutatingAdmissionPolicyBinding/sidecar-injector-proxy-namespace',
      'ValidatingAdmissionPolicy/sidecar-injector-validate',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-pod',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-namespace',
      'ValidatingAdmissionPolicy/sidecar-injector-validate-bounds',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-bounds-pod',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-bounds-namespace',
    ]);
  });

  it('writes YAML kubectl reads, and keeps the given namespace out of injection', async () => {
    const r = await cli(['policies', 'templates', '--templates-namespace', 'platform']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /values:\n\s+- kube-system\n\s+- kube-public\n\s+- kube-node-lease\n\s+- platform\n/);
    assert.equal(r.out.split('---\n').map((d) => parse(d) as { kind: string }).length, 12);
  });

  it('names each template that does not compile with the reason, and exits 1: the webhook must inject it', async () => {
    const r = await cli(['policies', 'test/fixtures/cli/templates', '-o', 'json']);
    assert.equal(r.code, 1);
    assert.equal(
      r.err,
      'template "log-agent": not compiled to a policy: overrides (image) are checked by the webhook against the container runtime\'s image reference grammar; not compiled to CEL; the webhook injects it\n',
    );
    const validating = (JSON.parse(r.out) as { items: { kind: string; spec: { validations?: { expression: string }[] } }[] }).items.find(
      (o) => o.kind === 'ValidatingAdmissionPolicy',
    )!;
    assert.match(validating.spec.validations![1]!.expression, /\["log-agent"\]/, 'a pod that selects it is refused, not left without sidecars');
  });

  it('lint --policies adds one line per template; lint alone prints what it always did', async () => {
    const r = await cli(['lint', 'templates', '--policies']);
    assert.equal(r.code, 0, r.err);
    assert.match(
      r.out,
      /\npolicy: template "log-shipper": MutatingAdmissionPolicy sidecar-injector-log-shipper( \([^\n]*\))?\npolicy: template "proxy": MutatingAdmissionPolicy sidecar-injector-proxy( \([^\n]*\))?\n(policy: CEL cost unchecked: [^\n]*\n)?$/,
    );
    const plain = await cli(['lint', 'templates']);
    assert.doesNotMatch(plain.out, /policy:/);
    const fixtures = await cli(['lint', 'test/fixtures/cli/templates', '--policies']);
    assert.match(fixtures.out, /\npolicy: template "log-agent": webhook only: overrides \(image\) are checked by the webhook/);
    assert.match(fixtures.out, /\npolicy: template "mesh": MutatingAdmissionPolicy sidecar-injector-mesh( \([^\n]*\))?\n/);
  });
  it('policies and lint --policies report a template whose value has no CEL form as not compiled, with its JSON path, and compile the others', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'policies-null-'));
    await writeFile(
      join(dir, 'broken.yaml'),
      'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: broken\nspec:\n  nativeSidecar: true\n  containers:\n    - name: broken\n      image: busybox:1.36\n      args: ["a", null]\n',
    );
    await writeFile(
      join(dir, 'mesh.yaml'),
      'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: mesh\nspec:\n  containers:\n    - name: mesh\n      image: registry.example.com/mesh:1\n',
    );
    const why = '/spec/containers/0/args/1: null has no CEL form in a policy: give it a value or remove it';
    const r = await cli(['policies', dir, '-o', 'json', '--verify', 'never']);
    assert.equal(r.code, 1);
    assert.equal(r.err, `template "broken": not compiled to a policy: ${why}; the webhook injects it\n`);
    assert.ok((JSON.parse(r.out) as { items: { metadata: { name: string } }[] }).items.some((o) => o.metadata.name === 'sidecar-injector-mesh'));
    const lint = await cli(['lint', dir, '--policies']);
    assert.equal(lint.code, 0, lint.err);
    assert.match(lint.out, new RegExp(`\\npolicy: template "broken": webhook only: ${why.replace(/[/()]/g, '\\$&')}\\n`));
    assert.match(lint.out, /\npolicy: template "mesh": MutatingAdmissionPolicy sidecar-injector-mesh[ \n]/);
  });

  it('compiles a required template: its policy bound to every pod of its namespaces, and the validating policy that holds it there', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'policies-required-'));
    await writeFile(
      join(dir, 'agent.yaml'),
      'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: agent\nspec:\n  required: {}\n  containers:\n    - name: agent\n      image: registry.example/agent:1\n',
    );
    const r = await cli(['policies', dir, '-o', 'json']);
    assert.equal(r.code, 0, r.err);
    const kinds = (JSON.parse(r.out) as { items: { kind: string; metadata: { name: string } }[] }).items.map((o) => `${o.kind}/${o.metadata.name}`);
    assert.deepEqual(kinds, [
      'MutatingAdmissionPolicy/sidecar-injector-agent',
      'MutatingAdmissionPolicyBinding/sidecar-injector-agent-required',
      'ValidatingAdmissionPolicy/sidecar-injector-validate',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-pod',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-namespace',
      'ValidatingAdmissionPolicy/sidecar-injector-validate-required',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-required-all',
      'ValidatingAdmissionPolicy/sidecar-injector-validate-bounds',
      'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-bounds-all',
    ]);
  });
});

describe('policies --templates-source cluster (the API stand-in serves SidecarTemplates)', () => {
  let api: FakeApiServer;
  let kube: string[];
  before(async () => {
    api = await startFakeApiServer();
    kube = ['--templates-source', 'cluster', '--kubeconfig', api.kubeconfig];
    api.applyTemplate(sct(HOME, 'proxy', 'registry.example.com/proxy:1', { default: true }));
    api.applyTemplate(sct('team-a', 'mesh', 'registry.example.com/mesh:1', { default: true }));
    const broken = sct('team-a', 'broken', 'registry.example.com/broken:1');
    broken.spec.contaners = [];
    api.applyTemplate(broken);
  });
  after(() => api.close());
  const kinds = (out: string): string[] =>
    (JSON.parse(out) as { items: { kind: string; metadata: { name: string } }[] }).items.map((o) => `${o.kind}/${o.metadata.name}`);

  it("prints the cluster-wide policies and each namespace's view's, naming invalid objects on stderr", async () => {
    const r = await cli(['policies', ...kube, '-o', 'json']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /^note: sidecartemplate team-a\/broken is invalid and not served: .*contaners/);
    assert.deepEqual(
      kinds(r.out).filter((k) => !k.includes('Binding/')),
      [
        'MutatingAdmissionPolicy/sidecar-injector-proxy',
        'ValidatingAdmissionPolicy/sidecar-injector-validate',
        'ValidatingAdmissionPolicy/sidecar-injector-validate-bounds',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-a.mesh',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-a.proxy',
        'ValidatingAdmissionPolicy/sidecar-injector.ns.team-a.validate',
        'ValidatingAdmissionPolicy/sidecar-injector.ns.team-a.validate-bounds',
      ],
    );
  });

  it("with -n, the namespace's view alone, read with namespaced lists; a namespace without templates of its own says where its policies are", async () => {
    const seen = api.calls.length;
    const r = await cli(['policies', ...kube, '-n', 'team-a', '--revision', 'canary', '--api-version', 'v1beta1', '-o', 'json']);
    assert.equal(r.code, 0, r.err);
    const items = (JSON.parse(r.out) as { items: { kind: string; apiVersion: string; metadata: { name: string } }[] }).items;
    assert.deepEqual(
      items.filter((o) => !o.kind.includes('Binding')).map((o) => `${o.apiVersion} ${o.kind}/${o.metadata.name}`),
      [
        'admissionregistration.k8s.io/v1beta1 MutatingAdmissionPolicy/sidecar-injector.rev-ns.canary.team-a.mesh',
        'admissionregistration.k8s.io/v1beta1 MutatingAdmissionPolicy/sidecar-injector.rev-ns.canary.team-a.proxy',
        'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy/sidecar-injector.rev-ns.canary.team-a.validate',
        'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy/sidecar-injector.rev-ns.canary.team-a.validate-bounds',
      ],
    );
    const lists = api.calls.slice(seen).filter((c) => c.path.includes('sidecartemplates'));
    assert.ok(lists.length > 0 && lists.every((c) => /\/namespaces\/(team-a|sidecar-injector)\//.test(c.path)), 'namespaced lists only');
    const none = await cli(['policies', ...kube, '-n', 'team-c']);
    assert.equal(none.code, 0);
    assert.equal(none.out, '');
    assert.match(none.err, /^namespace team-c has no SidecarTemplates of its own: its pods get the cluster-wide policies/);
  });

  it("lint --policies says per template of the cluster whether it compiles, a namespace's with its namespace", async () => {
    const r = await cli(['lint', ...kube, '--policies']);
    assert.equal(r.code, 1, 'team-a/broken is an error');
    assert.match(
      r.out,
      /\npolicy: template "proxy": MutatingAdmissionPolicy sidecar-injector-proxy\npolicy: template "mesh" of namespace team-a: MutatingAdmissionPolicy sidecar-injector.ns.team-a.mesh\n$/,
    );
    const teamA = await cli(['lint', ...kube, '--policies', '-n', 'team-a', '-o', 'json']);
    assert.deepEqual(
      JSON.parse(teamA.out).policies.map((v: { template: string; namespace?: string }) => `${v.namespace ?? ''}/${v.template}`),
      ['/proxy', 'team-a/mesh'],
    );
  });

  it('refuses -n without the cluster, saying where the injector namespace went', async () => {
    const r = await cli(['policies', 'templates', '--namespace', 'platform']);
    assert.equal(r.code, 2);
    assert.match(
      r.err,
      /-n chooses a namespace of the cluster's SidecarTemplates; add --templates-source cluster \(the injector's namespace is --templates-namespace\)/,
    );
  });
});
