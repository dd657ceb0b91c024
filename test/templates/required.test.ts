import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { TemplateSetError } from '../../src/errors.js';
import { podDrift } from '../../src/drift/drift.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { selectTemplates } from '../../src/inject/policy.js';
import { verifyPod } from '../../src/inject/verify.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import { cli } from '../helpers/cli.js';
import { runningPod } from '../helpers/running-pods.js';

const doc = (name: string, spec: string) => `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\nspec:\n  containers:\n    - name: ${name}\n      image: registry.example.com/${name}:1\n${spec}`;
const AGENT = doc('agent', '  required:\n    namespaceSelector:\n      matchExpressions:\n        - {key: kubernetes.io/metadata.name, operator: NotIn, values: [legacy]}\n');
const MESH = doc('mesh', '  default: true\n');
const LOGGER = doc('logger', '');
const set = () => compileTemplateSet([{ file: 'a.yaml', text: AGENT }, { file: 'm.yaml', text: MESH }, { file: 'l.yaml', text: LOGGER }], 'dir');
const faults = (text: string): string[] => {
  try {
    compileTemplateSet([{ file: 't.yaml', text }], 'dir');
    return [];
  } catch (err) {
    if (!(err instanceof TemplateSetError)) throw err;
    return err.faults.map((f) => `${f.path}: ${f.message}`);
  }
};
const pod = (annotations: Record<string, string> = {}) => ({ metadata: { namespace: 'shop', labels: { 'sidecar-injector.io/inject': 'true' }, annotations } });
const names = (s: ReturnType<typeof selectTemplates>) => (s.inject ? s.templates.map((t) => t.name) : s.reason);

describe('required templates', () => {
  it('joins the defaults and the templates a pod names, in the namespaces its selector takes', () => {
    assert.deepEqual(names(selectTemplates(pod(), set())), ['mesh', 'agent']);
    assert.deepEqual(names(selectTemplates(pod({ 'sidecar-injector.io/templates': 'logger' }), set())), ['logger', 'agent']);
    assert.deepEqual(names(selectTemplates(pod({ 'sidecar-injector.io/templates': 'agent,logger' }), set())), ['agent', 'logger']);
    assert.deepEqual(names(selectTemplates(pod({ 'sidecar-injector.io/templates': 'logger' }), set(), 'pod', 'legacy')), ['logger']);
    assert.equal(names(selectTemplates({ metadata: { namespace: 'shop', labels: { 'sidecar-injector.io/inject': 'false' } } }, set())), 'opted-out');
  });

  it('is injected alone where no template is a default', () => {
    const only = compileTemplateSet([{ file: 'a.yaml', text: doc('agent', '  required: {}\n') }], 'dir');
    assert.deepEqual(names(selectTemplates(pod(), only, 'pod', 'anywhere')), ['agent']);
  });

  it('refuses at load a selector on another label than the name, one the apiserver would refuse, and an image override', () => {
    assert.deepEqual(faults(doc('a', '  required:\n    namespaceSelector:\n      matchLabels: {team: a}\n')), ['/spec/required/namespaceSelector: selects on label "team": the injector does not read namespaces, so a required template selects namespaces by "kubernetes.io/metadata.name" (their name) alone']);
    assert.match(faults(doc('a', '  required:\n    namespaceSelector:\n      matchExpressions: [{key: kubernetes.io/metadata.name, operator: In}]\n')).join(), /operator In needs at least one value/);
    assert.deepEqual(faults(doc('a', '  overrides: [image]\n  required: {}\n')), ['/spec/overrides: a required template cannot let pods override its image (a pod could run anything in its place): remove image from overrides']);
    assert.match(faults(doc('a', '  required: {namespaces: [a]}\n')).join(), /\/spec\/required\/namespaces: unknown field "namespaces"/);
  });

  it('lets a set served before admit a pod at /validate only if the pod holds the templates required now', () => {
    const earlier = compileTemplateSet([{ file: 'm.yaml', text: MESH }, { file: 'l.yaml', text: LOGGER }], 'dir');
    const now = { ...set(), history: { earlier: [earlier], knows: () => false, acceptsUnversioned: false, sawUnknownVersion: () => undefined } };
    const meshOnly = injectSidecars(pod(), earlier.defaults, 'shop').pod;
    const verdict = verifyPod(meshOnly, now, 'shop');
    assert.equal(verdict.kind, 'denied');
    assert.equal(verdict.kind === 'denied' && verdict.reason, 'required-sidecar-missing');
    // Where it is not required, the pod holds what its namespace gets.
    assert.equal(verifyPod(meshOnly, now, 'legacy').kind, 'allowed');
  });

  it('makes drift say a pod injected without it is stale, naming it and why', () => {
    const before = compileTemplateSet([{ file: 'm.yaml', text: MESH }, { file: 'a.yaml', text: doc('agent', '') }], 'dir');
    const p = runningPod(before, { namespace: 'shop', name: 'web' });
    const verdict = podDrift(p, set());
    assert.equal(verdict?.reason, 'templates-changed');
    assert.equal(verdict?.detail, 'injected with "mesh", would get "mesh", "agent" now; template "agent" is required in namespace shop (its namespaceSelector takes it) by the platform\'s spec.required');
  });

  it('is known to lint (its faults) and explain (why the pod gets it)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'required-'));
    await writeFile(join(dir, 'agent.yaml'), AGENT);
    await writeFile(join(dir, 'logger.yaml'), LOGGER);
    const pod = join(await mkdtemp(join(tmpdir(), 'required-pod-')), 'pod.yaml');
    await writeFile(pod, 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: shop\n  labels: {sidecar-injector.io/inject: "true"}\n  annotations: {sidecar-injector.io/templates: logger}\nspec:\n  containers: [{name: app, image: app:1}]\n');
    const explained = await cli(['explain', '-f', pod, '--templates-dir', dir, '-o', 'json']);
    assert.equal(explained.code, 0, explained.err);
    const report = JSON.parse(explained.out)[0];
    assert.ok(report.why.includes('template "agent" is required in namespace shop (its namespaceSelector takes it) by the platform\'s spec.required'), report.why.join('\n'));
    const injected = await cli(['inject', '-f', pod, '--templates-dir', dir]);
    assert.match(injected.out, /name: agent\n/);
    await writeFile(join(dir, 'bad.yaml'), doc('bad', '  overrides: [image]\n  required: {}\n'));
    const linted = await cli(['lint', dir]);
    assert.equal(linted.code, 1);
    assert.match(linted.out + linted.err, /bad\.yaml:\d+:\d+: error: template "bad": \/spec\/overrides: a required template cannot let pods override its image/);
  });
});
