import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mutating } from '../../src/admission/handlers.js';
import { InjectorError } from '../../src/errors.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import { renderValues } from '../../src/templates/placeholders.js';
import { RenderBudget } from '../../src/templates/template.js';
import { memoryAfterGc } from '../helpers/memory.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { set, template as templateDoc } from '../helpers/templates.js';

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
    render({ zone: 'a', app: 'web' });
    const kept = render({ zone: 'a', app: 'web' });
    const third = render({ zone: 'a', app: 'other', 'pod-template-hash': 'x' });
    assert.equal(third, kept, 'labels no placeholder reads do not matter');
  });

  it('keeps a rendering from its second sighting on, never one made once', () => {
    const first = render({ zone: 'once' });
    const second = render({ zone: 'once' });
    assert.notEqual(second, first, 'a first sighting takes no entry');
    assert.deepEqual(second, first);
    assert.equal(render({ zone: 'once' }), second, 'kept from the second sighting');
    // A stream of pods each rendering for itself forgets its sightings: a pod seen again after 64 others renders afresh.
    const lone = render({ zone: 'lone' });
    for (let i = 0; i < 64; i++) render({ zone: `stream-${i}` });
    const back = render({ zone: 'lone' });
    assert.notEqual(back, lone);
    assert.notEqual(render({ zone: 'lone' }), back, 'its sighting was forgotten: this is its second one');
    assert.equal(render({ zone: 'lone' }), render({ zone: 'lone' }));
  });

  it("remembers each template's sightings apart: another template's stream of pods does not shorten its window", () => {
    const other = compileTemplateSet([{ file: 'other.yaml', text: TEMPLATE.replace(/agent/g, 'other') }], 'test').templates.get('other')!;
    render({ zone: 'apart' });
    for (let i = 0; i < 100; i++) other.render(renderValues(pod({ zone: `other-${i}` }), 'shop'));
    const second = render({ zone: 'apart' });
    assert.equal(render({ zone: 'apart' }), second, 'kept on its second sighting');
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
    for (let round = 0; round < 2; round++) for (let i = 0; i < 300; i++) assert.equal(firstArg({ zone: `z${i}` }), `--zone=z${i}`);
    render({ zone: 'z5' });
    assert.equal(render({ zone: 'z5' }), render({ zone: 'z5' }));
  });

  it('gives the same rendering as a fresh one and freezes the shared result', () => {
    const labels = { zone: 'd', rack: '1' };
    render(labels);
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
    t.render(values, true);
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

describe('render budget', () => {
  const repeated = (times: number): string =>
    templateDoc('amp', `  containers:
    - name: amp
      image: example.com/amp:1
      args: [${Array.from({ length: times }, () => `"{{ pod.annotations['b'] }}"`).join(', ')}]
`);
  const podWithB = (bytes: number) => ({ metadata: { name: 'victim', annotations: { b: 'x'.repeat(bytes) } }, spec: { containers: [] } });

  it('refuses a rendering over its budget before building it, naming the template and the placeholder', () => {
    const amp = set(repeated(2000)).templates.get('amp')!;
    const values = renderValues(podWithB(250_000), 'team-a');
    const heap = process.memoryUsage().heapUsed;
    assert.throws(
      () => amp.render(values, false, new RenderBudget(1024 * 1024)),
      (err: unknown) =>
        err instanceof InjectorError &&
        err.code === 'RENDERING_TOO_LARGE' &&
        err.message === `template "amp" would add more than 1048576 bytes to the pod (--max-patch-kib): {{ pod.annotations['b'] }} expands to 250000 bytes for this pod, 2000 times in the template; shorten that value of the pod, or ask the template's owner to read it fewer times`,
    );
    // 2000 copies of 250,000 bytes would be 500 MB: nothing of that size was ever built.
    assert.ok(process.memoryUsage().heapUsed - heap < 64 * 1024 * 1024);
  });

  it('renders what fits, and counts the expansions in UTF-8 bytes', () => {
    const amp = set(repeated(4)).templates.get('amp')!;
    assert.equal((amp.render(renderValues(podWithB(200_000), 'team-a'), false, new RenderBudget(1024 * 1024)).containers[0]!.args as string[]).length, 4);
    const wide = { metadata: { name: 'victim', annotations: { b: 'é'.repeat(140_000) } }, spec: { containers: [] } };
    assert.throws(() => amp.render(renderValues(wide, 'team-a'), false, new RenderBudget(1024 * 1024)), /expands to 280000 bytes/);
  });

  it('charges every template rendered for one pod to one budget', () => {
    const both = set(repeated(2), templateDoc('other', `  containers:
    - name: other
      image: example.com/other:1
      args: ["{{ pod.annotations['b'] }}", "{{ pod.annotations['b'] }}"]
`));
    const values = renderValues(podWithB(300_000), 'team-a');
    const budget = new RenderBudget(1024 * 1024);
    both.templates.get('amp')!.render(values, false, budget);
    assert.throws(() => both.templates.get('other')!.render(values, false, budget), /template "other" would add more than 1048576 bytes/);
  });

  it('counts a template\'s own text', () => {
    const big = set(templateDoc('big', `  containers:
    - name: big
      image: example.com/big:1
      args: ["${'y'.repeat(5000)}", "{{ pod.name }}"]
`)).templates.get('big')!;
    assert.throws(() => big.render(renderValues(podWithB(1), 'team-a'), false, new RenderBudget(4096)), /template "big" would add more than 4096 bytes to the pod \(--max-patch-kib\): the template's own text takes 5\d\d\d bytes/);
    assert.equal((big.render(renderValues(podWithB(1), 'team-a'), false, new RenderBudget(8192)).containers[0]!.args as string[])[1], 'victim');
  });
});

describe('kept renderings', () => {
  it('renders afresh, and keeps nothing of, a rendering that allocates more than a kept one may', () => {
    const wide = set(templateDoc('wide', `  containers:
    - name: wide
      image: example.com/wide:1
      args: ["${'z'.repeat(20_000)}{{ pod.name }}"]
`)).templates.get('wide')!;
    const values = renderValues({ metadata: { name: 'p1' }, spec: { containers: [] } }, 'team-a');
    assert.notEqual(wide.render(values), wide.render(values));
    const narrow = set(templateDoc('narrow', `  containers:
    - name: narrow
      image: example.com/narrow:1
      args: ["--name={{ pod.name }}"]
`)).templates.get('narrow')!;
    narrow.render(values);
    assert.equal(narrow.render(values), narrow.render(values));
  });

  it('keeps renderings within a byte budget, the oldest out first', () => {
    const t = set(templateDoc('kept', `  containers:
    - name: kept
      image: example.com/kept:1
      args: ["{{ pod.labels['v'] }}"]
`)).templates.get('kept')!;
    const values = (i: number) => renderValues({ metadata: { name: 'p', labels: { v: `${i}-${'v'.repeat(3000)}` } }, spec: { containers: [] } }, 'team-a');
    const first = t.render(values(0));
    t.render(values(0));
    const kept = t.render(values(0));
    assert.equal(t.render(values(0)), kept, 'kept');
    // Each rendering takes some 12 KB of a 4 MiB cache: 400 of them push the first out.
    for (let i = 1; i < 400; i++) for (const _ of [1, 2]) t.render(values(i));
    assert.notEqual(t.render(values(0)), kept);
    assert.deepEqual(t.render(values(0)), first);
  });
});

describe('renderings of many pods', () => {
  it('holds nothing of 250 distinct pods\' renderings of a template with a 900 KB argument and the pod\'s name', async () => {
    const wide = set(templateDoc('wide', `  default: true
  containers:
    - name: wide
      image: registry.example.com/wide:1
      args: ["${'w'.repeat(900_000)}{{ pod.name }}"]
`));
    const handle = mutating({ templates: () => wide });
    const before = (await memoryAfterGc()).heapUsed;
    for (let i = 0; i < 250; i++) {
      const verdict = handle(podReview(optedInPod({ name: `wide-${i}` })).request);
      assert.equal(verdict.response.allowed, true, verdict.response.status?.message);
    }
    const held = (await memoryAfterGc()).heapUsed - before;
    // Each rendering is a 900 KB string: kept per template (up to 256), 250 of them held 220 MB.
    assert.ok(held < 32 * 1024 * 1024, `${(held / 1024 / 1024).toFixed(1)} MiB held`);
  });
});
