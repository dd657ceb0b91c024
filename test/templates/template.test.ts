import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileTemplateSet } from '../../src/templates/load.js';
import { renderValues } from '../../src/templates/placeholders.js';

const TEMPLATE = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: agent
spec:
  default: true
  containers:
    - name: agent
      image: example.com/agent:1
      args: ["--zone={{ pod.labels['zone'] | default 'none' }}{{ pod.labels['rack'] }}", "--ns={{ namespace }}"]
`;

const template = compileTemplateSet([{ file: 'agent.yaml', text: TEMPLATE }], 'test').templates.get('agent')!;
const pod = (labels: Record<string, string>) => ({ metadata: { generateName: 'web-', labels }, spec: { containers: [] } });
const render = (labels: Record<string, string>, namespace = 'shop') => template.render(renderValues(pod(labels), namespace));
const firstArg = (labels: Record<string, string>): string | undefined => (render(labels).containers[0]?.['args'] as string[] | undefined)?.[0];

describe('compiled template rendering', () => {
  it('expands the placeholders from the pod', () => {
    assert.deepEqual(render({ zone: 'a', rack: '7' }).containers[0]!.args, ['--zone=a7', '--ns=shop']);
    assert.deepEqual(render({}).containers[0]!.args, ['--zone=none', '--ns=shop']);
  });

  it('reuses the rendering for a pod whose placeholders expand alike', () => {
    const first = render({ zone: 'a', app: 'web' });
    const second = render({ zone: 'a', app: 'other', 'pod-template-hash': 'x' });
    assert.equal(second, first, 'labels no placeholder reads do not matter');
  });

  it('renders afresh when any placeholder expands differently', () => {
    const base = render({ zone: 'b' });
    assert.notEqual(render({ zone: 'c' }), base);
    assert.deepEqual(render({ zone: 'c' }).containers[0]!.args, ['--zone=c', '--ns=shop']);
    assert.deepEqual(render({ zone: 'b' }, 'billing').containers[0]!.args, ['--zone=b', '--ns=billing']);
  });

  it('keeps values apart that would read alike if joined', () => {
    // "a" + "bc" and "ab" + "c" render the same text, so sharing is right; a separator inside a
    // value must never make two different expansions share one rendering.
    assert.equal(firstArg({ zone: 'a', rack: 'bc' }), '--zone=abc');
    assert.equal(firstArg({ zone: 'a","', rack: 'x' }), '--zone=a","x');
    assert.equal(firstArg({ zone: 'a', rack: '","x' }), '--zone=a","x');
    assert.equal(firstArg({ zone: 'a\u0000', rack: 'x' }), '--zone=a\u0000x');
    assert.equal(firstArg({ zone: 'a', rack: '\u0000x' }), '--zone=a\u0000x');
  });

  it('keeps renderings apart whose placeholder values differ only in where one ends and the next begins', () => {
    assert.deepEqual(render({ zone: 'a' }, 'bshop').containers[0]!.args, ['--zone=a', '--ns=bshop']);
    assert.deepEqual(render({ zone: 'ab' }, 'shop').containers[0]!.args, ['--zone=ab', '--ns=shop']);
  });

  it('renders right once it has started over at its bound of 256 renderings', () => {
    for (let i = 0; i < 300; i++) assert.equal(firstArg({ zone: `z${i}` }), `--zone=z${i}`);
    assert.equal(render({ zone: 'z5' }), render({ zone: 'z5' }));
  });

  it('gives the same rendering as a fresh one and freezes the shared result', () => {
    const labels = { zone: 'd', rack: '1' };
    const cached = render(labels);
    const again = render(labels);
    assert.equal(again, cached);
    assert.ok(Object.isFrozen(cached) && Object.isFrozen(cached.containers[0]) && Object.isFrozen(cached.containers[0]!.args));
    const fresh = compileTemplateSet([{ file: 'agent.yaml', text: TEMPLATE }], 'test').templates.get('agent')!.render(renderValues(pod(labels), 'shop'));
    assert.deepEqual(fresh, cached);
  });

  it('renders a pod with a very long placeholder value without keeping it', () => {
    const long = 'z'.repeat(5000);
    const a = render({ zone: long });
    assert.equal(firstArg({ zone: long }), `--zone=${long}`);
    assert.notEqual(render({ zone: long }), a, 'not cached: the cache key would be too large');
  });
});

describe('what a compiled template knows of itself', () => {
  const compile = (spec: string) => compileTemplateSet([{ file: 't.yaml', text: `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: t\nspec:\n${spec}` }], 'test').templates.get('t')!;
  const values = renderValues(pod({ app: 'web' }), 'shop');

  it('lists the keys it adds or reads', () => {
    const t = compile(`  labels: { team: a }
  annotations: { t.sidecar-injector.io/version: "1" }
  containers:
    - name: c
      image: example.com/c:1
      args: ["{{ pod.labels['app'] }}", "{{ pod.annotations[\\"note\\"] }}", "pod.annotations['literal']"]
`);
    assert.deepEqual([...t.keys].sort(), ['app', 'note', 't.sidecar-injector.io/version', 'team']);
    assert.deepEqual([...t.reads.annotations], ['note'], 'text outside a placeholder reads nothing');
    assert.equal(t.addsOverrideKeys, true);
    assert.equal(compile(`  annotations: { fluentbit.io/exclude: "true" }\n  containers: [{ name: c, image: example.com/c:1 }]\n`).addsOverrideKeys, false);
  });

  it('renders native sidecars for a Job pod when nativeSidecar is jobs, and keeps that rendering', () => {
    const t = compile(`  nativeSidecar: jobs\n  containers: [{ name: c, image: "example.com/c:{{ namespace }}" }]\n`);
    assert.equal(t.render(values).nativeSidecar, false);
    assert.equal(t.render(values).containers[0]!.restartPolicy, undefined);
    const inJob = t.render(values, true);
    assert.equal(inJob.nativeSidecar, true);
    assert.deepEqual(inJob.containers, [{ name: 'c', image: 'example.com/c:shop', restartPolicy: 'Always' }]);
    assert.equal(t.render(values, true), inJob);
    assert.ok(Object.isFrozen(inJob.containers[0]));
    const regular = compile(`  containers: [{ name: c, image: example.com/c:1 }]\n`);
    assert.equal(regular.render(values, true), regular.render(values), 'a template without nativeSidecar: jobs renders alike in a Job pod');
    assert.ok(Object.isFrozen(regular.render(values).containers[0]));
  });
});
