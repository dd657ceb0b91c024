import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TemplateSetError, InjectorError } from '../../src/errors.js';
import { compileTemplateSet, loadTemplateSet } from '../../src/templates/load.js';

const head = (name: string) => `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\n`;

function faultsOf(files: { file: string; text: string }[]) {
  try {
    compileTemplateSet(files, 'test');
  } catch (err) {
    assert.ok(err instanceof TemplateSetError, String(err));
    return err.faults;
  }
  assert.fail('expected the set to be rejected');
}

describe('template loading', () => {
  it('loads the bundled templates with log-shipper as the default', async () => {
    const set = await loadTemplateSet('templates');
    assert.deepEqual([...set.templates.keys()].sort(), ['log-shipper', 'proxy']);
    assert.deepEqual(set.defaults.map((t) => t.name), ['log-shipper']);
    assert.equal(set.templates.get('proxy')!.nativeSidecar, true);
    assert.match(set.digest, /^[0-9a-f]{16}$/);
  });

  it('loads bundled templates that need nothing in the pod\'s namespace, so the first injected pod of a fresh cluster runs (issue 21)', async () => {
    const set = await loadTemplateSet('templates');
    // What a pod waits for (ContainerCreating, CreateContainerConfigError) until someone creates it.
    const needs = (where: string, ref: { optional?: boolean } | undefined): string[] => (ref !== undefined && ref.optional !== true ? [where] : []);
    for (const t of set.templates.values()) {
      const missing: string[] = [];
      for (const v of t.spec.volumes as any[]) {
        missing.push(...needs(`volume ${v.name}: configMap`, v.configMap), ...needs(`volume ${v.name}: secret`, v.secret));
        if (v.persistentVolumeClaim !== undefined) missing.push(`volume ${v.name}: persistentVolumeClaim`);
        for (const source of v.projected?.sources ?? []) missing.push(...needs(`volume ${v.name}: projected configMap`, source.configMap), ...needs(`volume ${v.name}: projected secret`, source.secret));
      }
      for (const c of [...t.spec.containers, ...t.spec.initContainers] as any[]) {
        for (const e of [...(c.env ?? []), ...t.spec.env] as any[]) missing.push(...needs(`env ${e.name}: configMapKeyRef`, e.valueFrom?.configMapKeyRef), ...needs(`env ${e.name}: secretKeyRef`, e.valueFrom?.secretKeyRef));
        for (const e of c.envFrom ?? []) missing.push(...needs(`${c.name} envFrom configMapRef`, e.configMapRef), ...needs(`${c.name} envFrom secretRef`, e.secretRef));
      }
      assert.deepEqual(missing, [], `template "${t.name}" needs what no install creates in the pod's namespace`);
    }
  });

  it('reports hostile values that crash the schema check as a fault of the template (hostile values)', () => {
    for (const value of ['[{}, {"valueOf": []}]', '[{}, {"toString": 1}]']) {
      const faults = faultsOf([{ file: 't.yaml', text: `${head('t')}spec:\n  overrides: ${value}\n  containers:\n    - name: a\n      image: registry.example.com/a:1\n` }]);
      assert.ok(faults.length > 0);
      assert.match(faults.map((f) => f.message).join('\n'), /cannot compare|must be/);
    }
  });

  it('reports a fault with its file, template name, JSON path and line', () => {
    const text = `${head('bad')}spec:\n  containers:\n    - name: agent\n      image: 42\n`;
    const faults = faultsOf([{ file: 't/bad.yaml', text }]);
    assert.equal(faults.length, 1);
    assert.deepEqual({ ...faults[0] }, { file: 't/bad.yaml', template: 'bad', path: '/spec/containers/0/image', message: 'must be a string, got 42: YAML 1.1 (kubectl) reads it unquoted as a boolean or number, so quote it', line: 8, column: 14 });
  });

  it('names a misspelled container field', () => {
    const text = `${head('typo')}spec:\n  containers:\n    - name: agent\n      image: busybox\n      imagePullPolicyy: Always\n`;
    const [fault] = faultsOf([{ file: 'typo.yaml', text }]);
    assert.equal(fault!.path, '/spec/containers/0/imagePullPolicyy');
    assert.match(fault!.message, /unknown field "imagePullPolicyy" \(did you mean "imagePullPolicy"\?\)/);
    assert.equal(fault!.line, 9);
  });

  it('compares a long unknown field with the known names without a full table of edits', () => {
    const field = `x${'y'.repeat(200_000)}`;
    const text = `${head('long')}spec:\n  containers:\n    - name: agent\n      image: busybox\n      ? ${field}\n      : 1\n      ? ${field}z\n      : 1\n`;
    const start = performance.now();
    const faults = faultsOf([{ file: 'long.yaml', text }]);
    const took = performance.now() - start;
    assert.ok(faults.some((f) => f.message.startsWith('unknown field "xyyy') && f.message.includes('known fields:') && f.message.length < 1000), JSON.stringify(faults.map((f) => f.message.slice(0, 80))));
    // A full table took over a minute for each such field (200 000 characters by each known name).
    assert.ok(took < 1000, `${took} ms`);
  });

  it('collects every fault of every file before failing', () => {
    const faults = faultsOf([
      { file: 'a.yaml', text: `${head('a')}spec:\n  containers:\n    - name: Bad_Name\n      image: x\n` },
      { file: 'b.yaml', text: `${head('b')}spec:\n  volumes:\n    - name: v\n      secret: { secretName: s, defaultMode: 777 }\n` },
      { file: 'c.yaml', text: 'apiVersion: v1\nkind: ConfigMap\n' },
    ]);
    assert.deepEqual(faults.map((f) => f.file), ['a.yaml', 'b.yaml', 'c.yaml', 'c.yaml', 'c.yaml', 'c.yaml']);
  });

  it('refuses {{ pod.name }} in a label value at file:line: a Deployment\'s pod renders its generateName, ending in "-" (issue 21)', () => {
    const text = `${head('owner')}spec:\n  labels:\n    owner-pod: "{{ pod.name }}"\n`;
    const [fault, ...rest] = faultsOf([{ file: 'owner.yaml', text }]);
    assert.deepEqual(rest, []);
    assert.equal(fault!.path, '/spec/labels/owner-pod');
    assert.equal(fault!.line, 7);
    assert.match(fault!.message, /renders "web-7d9f8b6c5-", which Kubernetes refuses as a label value/);
  });

  it('refuses a static label value and image that Kubernetes refuses', () => {
    const text = `${head('bad')}spec:\n  labels:\n    team: "payments eu"\n  containers:\n    - name: agent\n      image: "Busybox:1"\n`;
    assert.deepEqual(faultsOf([{ file: 'bad.yaml', text }]).map((f) => [f.path, f.line]), [['/spec/labels/team', 7], ['/spec/containers/0/image', 10]]);
  });

  it('rejects an unknown placeholder at load, with its path', () => {
    const text = `${head('ph')}spec:\n  containers:\n    - name: agent\n      image: busybox\n      args: ["{{ pod.spec.nodeName }}"]\n`;
    const [fault] = faultsOf([{ file: 'ph.yaml', text }]);
    assert.equal(fault!.path, '/spec/containers/0/args/0');
    assert.match(fault!.message, /unknown placeholder/);
    assert.equal(fault!.line, 9);
  });

  it('rejects duplicate template names across files and duplicate containers within one', () => {
    const one = `${head('dup')}spec:\n  containers:\n    - { name: a, image: x }\n    - { name: a, image: z }\n`;
    const two = `${head('dup')}spec:\n  volumes:\n    - { name: v, emptyDir: {} }\n`;
    const faults = faultsOf([{ file: '1.yaml', text: one }, { file: '2.yaml', text: two }]);
    assert.ok(faults.some((f) => f.path === '/spec/containers/1/name' && /duplicate container name "a"/.test(f.message)));
    assert.ok(faults.some((f) => f.file === '2.yaml' && /duplicate template name/.test(f.message)));
  });

  it('reports YAML syntax errors with their position', () => {
    const [fault] = faultsOf([{ file: 'broken.yaml', text: `${head('x')}spec:\n  containers: [\n` }]);
    assert.equal(fault!.file, 'broken.yaml');
    assert.match(fault!.message, /^YAML:/);
    assert.ok(fault!.line !== undefined);
  });

  it('refuses restartPolicy on containers of a template that is not a native sidecar', () => {
    const text = `${head('rp')}spec:\n  containers:\n    - { name: a, image: x, restartPolicy: Always }\n`;
    const [fault] = faultsOf([{ file: 'rp.yaml', text }]);
    assert.equal(fault!.path, '/spec/containers/0/restartPolicy');
  });

  it('refuses probes on a plain init container, which the apiserver would reject in the pod', () => {
    const text = `${head('init')}spec:\n  initContainers:\n    - name: prep\n      image: x\n      readinessProbe: { exec: { command: [/bin/true] } }\n`;
    const [fault] = faultsOf([{ file: 'init.yaml', text }]);
    assert.equal(fault!.path, '/spec/initContainers/0/readinessProbe');
    assert.equal(fault!.line, 9);
  });

  it('refuses a templates directory with no templates', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tpl-empty-'));
    await writeFile(join(dir, 'README.md'), 'not a template');
    await assert.rejects(loadTemplateSet(dir), (err: unknown) => err instanceof InjectorError && err.code === 'TEMPLATES_EMPTY');
  });

  it('skips the hidden entries of a mounted ConfigMap', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tpl-cm-'));
    await writeFile(join(dir, '..data'), 'garbage: [');
    await writeFile(join(dir, 'ok.yaml'), `${head('ok')}spec:\n  env:\n    - { name: A, value: b }\n`);
    const set = await loadTemplateSet(dir);
    assert.deepEqual([...set.templates.keys()], ['ok']);
  });

  it('freezes compiled templates so a review cannot change them', async () => {
    const set = await loadTemplateSet('templates');
    const spec = set.templates.get('log-shipper')!.spec;
    assert.throws(() => {
      (spec.containers[0] as any).image = 'evil';
    }, TypeError);
  });
});

describe('every fault in one run', () => {
  const head = (name: string) => `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\n`;
  it('reports a schema fault, a volume with two sources and a {{ pod.name }} label of one template together, once each', () => {
    const text = `${head('agent')}spec:\n  labels:\n    agent-for: "{{ pod.name }}"\n  containers:\n    - name: agent\n      image: example.com/agent:1\n      imagePullPolicy: Sometimes\n      volumeMounts: [{name: data, mountPath: /data}]\n  volumes:\n    - name: data\n      emptyDir: {}\n      configMap: {name: x}\n`;
    let faults: readonly { path: string; message: string }[] = [];
    try {
      compileTemplateSet([{ file: 'agent.yaml', text }], 'dir');
    } catch (err) {
      faults = (err as TemplateSetError).faults;
    }
    assert.deepEqual(faults.map((f) => f.path), ['/spec/containers/0/imagePullPolicy', '/spec/volumes/0/configMap', '/spec/labels/agent-for']);
  });
});
