import assert from 'node:assert/strict';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { cli } from '../helpers/cli.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { runningPod } from '../helpers/running-pods.js';
import { clusterSet, compileObject } from '../../src/templates/cluster.js';
import { setFor, type TemplateSet } from '../../src/templates/load.js';
import type { CompiledTemplate } from '../../src/templates/template.js';

const sct = (namespace: string, name: string, image: string, extra: object = {}): any => ({
  metadata: { name, namespace },
  spec: { containers: [{ name, image }], ...extra },
});

describe('inject and explain with --templates-source cluster (issue 23)', () => {
  let api: FakeApiServer;
  let pod: string;
  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct('sidecar-injector', 'proxy', 'registry.example.com/proxy:1', { default: true }));
    api.applyTemplate(sct('team-a', 'mesh', 'registry.example.com/mesh:1', { default: true }));
    const broken = sct('team-a', 'broken', 'registry.example.com/broken:1');
    broken.spec.contaners = [];
    api.applyTemplate(broken);
    const dir = await mkdtemp(join(tmpdir(), 'cluster-templates-'));
    pod = join(dir, 'pod.yaml');
    await writeFile(
      pod,
      'apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {sidecar-injector.io/inject: "true"}\nspec:\n  containers: [{name: web, image: nginx}]\n',
    );
  });
  after(() => api.close());

  it("injects a pod with its namespace's templates over the cluster-wide ones, naming invalid objects on stderr", async () => {
    const inTeamA = await cli(['inject', '-f', pod, '-n', 'team-a', '--templates-source', 'cluster', '--kubeconfig', api.kubeconfig]);
    assert.equal(inTeamA.code, 0, inTeamA.err);
    assert.deepEqual(
      parse(inTeamA.out).spec.containers.map((c: any) => c.image),
      ['nginx', 'registry.example.com/mesh:1'],
    );
    assert.match(inTeamA.err, /sidecartemplate team-a\/broken is invalid and not served: .*contaners/);
    const inTeamB = await cli(['inject', '-f', pod, '-n', 'team-b', '--templates-source', 'cluster', '--kubeconfig', api.kubeconfig]);
    assert.deepEqual(
      parse(inTeamB.out).spec.containers.map((c: any) => c.image),
      ['nginx', 'registry.example.com/proxy:1'],
    );
  });

  it('explains with the same set', async () => {
    const res = await cli(['explain', '-f', pod, '-n', 'team-a', '--templates-source', 'cluster', '--kubeconfig', api.kubeconfig, '-o', 'json']);
    assert.equal(res.code, 0, res.err);
    assert.match(res.out, /mesh/);
    assert.doesNotMatch(res.out, /"proxy"/);
  });
});

describe('lint with --templates-source cluster (issue 23)', () => {
  // Native in Job pods, so that the only sample-pod warning is team-a's below.
  const sct = (namespace: string, name: string, image: string, extra: object = {}): any => ({
    metadata: { name, namespace },
    spec: { nativeSidecar: 'jobs', containers: [{ name, image }], ...extra },
  });
  let api: FakeApiServer;
  let kube: string[];
  before(async () => {
    api = await startFakeApiServer();
    kube = ['--templates-source', 'cluster', '--kubeconfig', api.kubeconfig];
    api.applyTemplate(sct('sidecar-injector', 'proxy', 'registry.example.com/proxy:1', { default: true }));
    // team-a's sidecar binds the sample application's port 8080: a sample-pod warning.
    const mesh = sct('team-a', 'mesh', 'registry.example.com/mesh:1');
    mesh.spec.containers[0].ports = [{ containerPort: 8080 }];
    api.applyTemplate(mesh);
    const broken = sct('team-a', 'broken', 'registry.example.com/broken:1');
    broken.spec.contaners = [];
    api.applyTemplate(broken);
    const brokenB = sct('team-b', 'broken-b', 'registry.example.com/broken:1');
    brokenB.spec.containers[0].imagePullPolicy = 'Sometimes';
    api.applyTemplate(brokenB);
    api.applyTemplate(sct('team-b', 'log', 'registry.example.com/log:1'));
  });
  after(() => api.close());

  it("reports invalid objects as errors and each namespace's view's sample-pod findings as warnings, and exits 1", async () => {
    const r = await cli(['lint', ...kube]);
    assert.equal(r.code, 1, r.err);
    assert.match(r.out, /^sidecartemplate team-a\/broken: error: template "broken": \/spec\/contaners: /m);
    assert.match(r.out, /^sidecartemplate team-b\/broken-b: error: template "broken-b": \/spec\/containers\/0\/imagePullPolicy: must be one of/m);
    assert.match(
      r.out,
      /^sidecartemplate team-a\/mesh: warning: template "mesh": \/spec\/containers\/0\/ports\/0\/containerPort: port 8080\/TCP is declared by both/m,
    );
    assert.match(r.out, /\n2 error\(s\), 1 warning\(s\) in the sidecartemplates of every namespace \(cluster-wide: sidecar-injector\)\n$/);
  });

  it('with -n, lints only what that namespace sees: its own objects and the cluster-wide ones', async () => {
    const teamA = await cli(['lint', ...kube, '-n', 'team-a', '-o', 'json']);
    assert.equal(teamA.code, 1, teamA.err);
    const report = JSON.parse(teamA.out);
    assert.deepEqual(
      [report.templatesNamespace, report.namespaces, report.templates],
      ['sidecar-injector', ['team-a'], ['sidecar-injector/proxy', 'team-a/mesh']],
    );
    assert.deepEqual(
      report.faults.map((f: any) => `${f.severity} ${f.file}`),
      ['error sidecartemplate team-a/broken', 'warning sidecartemplate team-a/mesh'],
    );
    assert.deepEqual([report.errors, report.warnings], [1, 1]);
    // A namespace without objects of its own sees the cluster-wide templates alone, which are good.
    const teamC = await cli(['lint', ...kube, '-n', 'team-c']);
    assert.equal(teamC.code, 0, teamC.out);
    assert.equal(
      teamC.out,
      "the sidecartemplates namespace team-c sees (its own over sidecar-injector's): 1 template(s) OK (sidecar-injector/proxy; Pod Security privileged)\n",
    );
    // --strict fails on the warning of team-a's view once the invalid object is gone.
    api.deleteTemplate('team-a', 'broken');
    try {
      assert.equal((await cli(['lint', ...kube, '-n', 'team-a'])).code, 0);
      assert.equal((await cli(['lint', ...kube, '-n', 'team-a', '--strict'])).code, 1);
    } finally {
      const broken = sct('team-a', 'broken', 'registry.example.com/broken:1');
      broken.spec.contaners = [];
      api.applyTemplate(broken);
    }
  });

  it('reports a default template refused for clashing with an older default of its namespace as an error', async () => {
    api.applyTemplate(
      sct('team-b', 'first', 'registry.example.com/first:1', { default: true, containers: [{ name: 'agent', image: 'registry.example.com/first:1' }] }),
    );
    api.applyTemplate(
      sct('team-b', 'second', 'registry.example.com/second:1', { default: true, containers: [{ name: 'agent', image: 'registry.example.com/second:1' }] }),
    );
    try {
      const r = await cli(['lint', ...kube, '-n', 'team-b', '-o', 'json']);
      assert.equal(r.code, 1);
      assert.deepEqual(
        JSON.parse(r.out)
          .faults.filter((f: any) => f.severity === 'error')
          .map((f: any) => f.file),
        ['sidecartemplate team-b/broken-b', 'sidecartemplate team-b/second'],
      );
    } finally {
      api.deleteTemplate('team-b', 'first');
      api.deleteTemplate('team-b', 'second');
    }
  });

  it('refuses DIR with the cluster, and -n without it', async () => {
    const both = await cli(['lint', 'templates', ...kube]);
    assert.equal(both.code, 2);
    assert.match(both.err, /give DIR \(templates\) or --templates-source cluster, not both/);
    const namespaceAlone = await cli(['lint', 'templates', '-n', 'team-a']);
    assert.equal(namespaceAlone.code, 2);
    assert.match(namespaceAlone.err, /-n and -A choose namespaces of the cluster; add --templates-source cluster/);
  });
});

/** The set the injector serves from these objects, as the API answers them. */
function setOf(...objects: any[]): TemplateSet {
  return clusterSet(
    objects.map((o) => ({ key: `${o.metadata.namespace}/${o.metadata.name}`, created: '', candidates: [compiled(o)] })),
    'sidecar-injector',
  ).set;
}

function compiled(obj: any): CompiledTemplate {
  const result = compileObject(obj);
  if (!result.ok) assert.fail(JSON.stringify(result.faults));
  return result.template;
}

describe('drift with --templates-source cluster (issue 23)', () => {
  let api: FakeApiServer;
  let kube: string[];
  before(async () => {
    api = await startFakeApiServer();
    kube = ['--templates-source', 'cluster', '--kubeconfig', api.kubeconfig];
    const wide = api.applyTemplate(sct('sidecar-injector', 'log', 'registry.example.com/log:2', { default: true }));
    const teams = api.applyTemplate(sct('team-a', 'log', 'registry.example.com/log-team:1', { default: true }));
    const broken = sct('team-b', 'broken', 'registry.example.com/broken:1');
    broken.spec.contaners = [];
    api.applyTemplate(broken);
    // The pods as the injector admitted them: in team-a, with its own template and before it had one;
    // in team-b, with the cluster-wide template and with its previous version.
    const set = setOf(wide, teams);
    const wideOnly = setOf(wide);
    const old = setOf({ apiVersion: wide.apiVersion, kind: wide.kind, ...sct('sidecar-injector', 'log', 'registry.example.com/log:1', { default: true }) });
    for (const name of ['team-a', 'team-b'])
      api.putObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'kubernetes.io/metadata.name': name } } });
    api.putObject(runningPod(setFor(set, 'team-a'), { namespace: 'team-a', name: 'own' }));
    api.putObject(runningPod(wideOnly, { namespace: 'team-a', name: 'before-own' }));
    api.putObject(runningPod(wideOnly, { namespace: 'team-b', name: 'wide' }));
    api.putObject(runningPod(old, { namespace: 'team-b', name: 'old' }));
  });
  after(() => api.close());

  it("judges a team-a pod against team-a's shadowing template, and a team-b pod against the cluster-wide one", async () => {
    const r = await cli(['drift', '-A', '--all', '-o', 'json', ...kube]);
    assert.equal(r.code, 0, r.err);
    const report = JSON.parse(r.out);
    assert.deepEqual(
      report.workloads.flatMap((w: any) => w.pods.map((p: any) => `${w.namespace}/${p.name}:${p.state}`)),
      ['team-a/before-own:stale', 'team-a/own:current', 'team-b/old:stale', 'team-b/wide:current'],
    );
    assert.equal(report.templates.source, 'sidecartemplates in sidecar-injector');
    assert.match(r.err, /^note: sidecartemplate team-b\/broken is invalid and not served: .*contaners/m);
  });

  it('counts per namespace: a line each in text, `namespaces` in JSON', async () => {
    const json = JSON.parse((await cli(['drift', '-A', '-o', 'json', ...kube])).out);
    assert.deepEqual(json.namespaces, [
      { namespace: 'team-a', injected: 2, stale: 1, missing: 0, current: 1 },
      { namespace: 'team-b', injected: 2, stale: 1, missing: 0, current: 1 },
    ]);
    assert.deepEqual([json.injected, json.stale, json.missing], [4, 2, 0]);
    const text = await cli(['drift', '-A', ...kube]);
    assert.match(
      text.out,
      /\n\nnamespace team-a: 1 stale, 0 missing, 1 current\nnamespace team-b: 1 stale, 0 missing, 1 current\n\n2 of 4 injected pod\(s\) in all namespaces are out of date, in 2 workload\(s\) \(templates: sidecartemplates in sidecar-injector, digest [0-9a-f]+\)\n$/,
    );
    // One namespace: its line would repeat the overall one.
    assert.doesNotMatch((await cli(['drift', '-n', 'team-a', ...kube])).out, /^namespace team-a:/m);
  });

  it('refuses --templates-source with --templates-dir or --templates-configmap', async () => {
    for (const flag of [
      ['--templates-dir', 'templates'],
      ['--templates-configmap', 'sidecar-injector/t'],
    ]) {
      const r = await cli(['drift', '-A', ...flag, ...kube]);
      assert.equal(r.code, 2);
      assert.match(r.err, /option '--templates-source <source>' cannot be used with option '--templates-(dir|configmap)/);
    }
  });
});

/**
 * A team holds the rights the documented bindings give it: the editor ClusterRole bound in its own
 * namespace (docs/templates.md, "Templates per team") and the install's read-only Role on the
 * cluster-wide templates in the injector's namespace, which every authenticated user holds
 * (sidecar-injector-template-reader). The API stand-in refuses everything else with 403, so a
 * cluster-wide list fails, as it does for such a team in a real cluster.
 */
describe("lint, inject and explain with a team's rights", () => {
  let api: FakeApiServer;
  let kube: string[];
  let pod: string;
  const teamRights = (method: string, path: string): boolean =>
    method === 'GET' && /^\/apis\/sidecar-injector\.io\/v1alpha1\/namespaces\/(team-a|sidecar-injector)\/sidecartemplates(\/[^/]+)?$/.test(path);
  before(async () => {
    api = await startFakeApiServer();
    kube = ['--templates-source', 'cluster', '--kubeconfig', api.kubeconfig];
    api.applyTemplate(sct('sidecar-injector', 'proxy', 'registry.example.com/proxy:1', { default: true }));
    api.applyTemplate(sct('team-a', 'mesh', 'registry.example.com/mesh:1', { default: true }));
    api.applyTemplate(sct('team-b', 'other', 'registry.example.com/other:1', { default: true }));
    api.grantOnly(teamRights);
    const dir = await mkdtemp(join(tmpdir(), 'team-rights-'));
    pod = join(dir, 'pod.yaml');
    await writeFile(
      pod,
      'apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {sidecar-injector.io/inject: "true"}\nspec:\n  containers: [{name: web, image: nginx}]\n',
    );
  });
  after(() => api.close());

  it('lints what team-a sees with -n team-a', async () => {
    const r = await cli(['lint', ...kube, '-n', 'team-a', '-o', 'json']);
    assert.equal(r.code, 0, r.err + r.out);
    assert.deepEqual(JSON.parse(r.out).templates, ['sidecar-injector/proxy', 'team-a/mesh']);
  });

  it('injects and explains a team-a pod', async () => {
    const injected = await cli(['inject', '-f', pod, '-n', 'team-a', ...kube]);
    assert.equal(injected.code, 0, injected.err);
    assert.deepEqual(
      parse(injected.out).spec.containers.map((c: any) => c.image),
      ['nginx', 'registry.example.com/mesh:1'],
    );
    const explained = await cli(['explain', '-f', pod, '-n', 'team-a', ...kube]);
    assert.equal(explained.code, 0, explained.err);
    assert.match(explained.out, /mesh/);
  });

  it("is refused another team's namespace, and every namespace, with a 403 that names the list", async () => {
    const r = await cli(['inject', '-f', pod, '-n', 'team-b', ...kube]);
    assert.notEqual(r.code, 0);
    assert.match(r.err, /403|forbidden/i);
    const all = await cli(['lint', ...kube]);
    assert.notEqual(all.code, 0);
    assert.match(all.err, /403|forbidden/i);
  });
});
