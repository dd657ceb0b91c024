import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileNamespacePolicies, compilePolicies, PolicyApi, type PolicySet } from '../../src/policy/compile.js';
import { clusterSet, compileObject } from '../../src/templates/cluster.js';
import { loadTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import type { CompiledTemplate } from '../../src/templates/template.js';
import { HOME, sct } from '../helpers/sidecartemplates.js';

type Obj = Record<string, any>;

/** The cluster's set as the webhook's store builds it from these objects. */
function setOf(...objects: Obj[]): TemplateSet {
  return clusterSet(
    objects.map((o) => ({ key: `${o['metadata'].namespace}/${o['metadata'].name}`, created: '', candidates: [compiled(o)] })),
    HOME,
  ).set;
}

function compiled(obj: Obj): CompiledTemplate {
  const result = compileObject(obj as never);
  if (!result.ok) throw new Error(JSON.stringify(result.faults));
  return result.template;
}

const objs = (p: PolicySet): Obj[] => p.objects as Obj[];
const names = (p: PolicySet): string[] => objs(p).map((o) => `${o['kind']}/${o['metadata'].name}`);
const byName = (p: PolicySet, name: string): Obj => objs(p).find((o) => o['metadata'].name === name)!;
const nsSelector = (binding: Obj): Obj[] => binding['spec'].matchResources.namespaceSelector.matchExpressions;

describe('compilePolicies', () => {
  it("annotates each template's objects with its name and its MutatingAdmissionPolicy with its spec as written, unless the spec passes 128 KiB", async () => {
    const set = await loadTemplateSet('templates');
    const p = compilePolicies(set, { namespace: HOME });
    const proxy = byName(p, 'sidecar-injector-proxy');
    assert.deepEqual(JSON.parse(proxy['metadata'].annotations['sidecar-injector.io/template-source']), set.templates.get('proxy')!.source);
    assert.equal(byName(p, 'sidecar-injector-proxy-pod')['metadata'].annotations['sidecar-injector.io/template'], 'proxy');
    assert.equal(byName(p, 'sidecar-injector-validate')['metadata'].annotations, undefined, "the validating policy is no template's");

    const env = Array.from({ length: 200 }, (_, i) => ({ name: `V${i}`, value: 'x'.repeat(1024) }));
    const big = compilePolicies(setOf(sct(HOME, 'big', 'registry.example.com/big:1', { env })), { namespace: HOME });
    const annotations = byName(big, 'sidecar-injector-big')['metadata'].annotations;
    assert.equal(annotations['sidecar-injector.io/template'], 'big');
    assert.equal(annotations['sidecar-injector.io/template-source'], undefined, 'over 128 KiB: the apiserver allows 256 KiB of annotations');
  });

  it('labels every object it makes with its manager and its revision ("default" without one), which the sync prunes by', async () => {
    const set = await loadTemplateSet('templates');
    for (const [revision, value] of [
      [undefined, 'default'],
      ['canary', 'canary'],
    ] as const) {
      const p = compilePolicies(set, { namespace: HOME, ...(revision !== undefined && { revision }) });
      for (const o of objs(p))
        assert.deepEqual(
          o['metadata'].labels,
          { 'app.kubernetes.io/managed-by': 'sidecar-injector', 'sidecar-injector.io/policies': value },
          o['metadata'].name,
        );
    }
  });

  it('compiles each namespace view of the cluster: cluster-wide policies everywhere else, a namespace view bound to its namespace alone', () => {
    const set = setOf(
      sct(HOME, 'proxy', 'registry.example.com/proxy:1', { default: true }),
      sct(HOME, 'agent', 'registry.example.com/agent:1'),
      sct('team-a', 'proxy', 'registry.example.com/team-a-proxy:1', { default: true }),
      sct('team-b', 'log', 'registry.example.com/log:1'),
    );
    const p = compilePolicies(set, { namespace: HOME });
    assert.deepEqual(
      names(p).filter((n) => n.startsWith('MutatingAdmissionPolicy/') || n.startsWith('ValidatingAdmissionPolicy/')),
      [
        'MutatingAdmissionPolicy/sidecar-injector-agent',
        'MutatingAdmissionPolicy/sidecar-injector-proxy',
        'ValidatingAdmissionPolicy/sidecar-injector-validate',
        'ValidatingAdmissionPolicy/sidecar-injector-validate-bounds',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-a.agent',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-a.proxy',
        'ValidatingAdmissionPolicy/sidecar-injector.ns.team-a.validate',
        'ValidatingAdmissionPolicy/sidecar-injector.ns.team-a.validate-bounds',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-b.agent',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-b.log',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-b.proxy',
        'ValidatingAdmissionPolicy/sidecar-injector.ns.team-b.validate',
        'ValidatingAdmissionPolicy/sidecar-injector.ns.team-b.validate-bounds',
      ],
    );
    const except = { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['team-a', 'team-b'] };
    assert.deepEqual(nsSelector(byName(p, 'sidecar-injector-proxy-pod')).at(-1), except);
    assert.deepEqual(nsSelector(byName(p, 'sidecar-injector-validate-namespace')).at(-1), except);
    assert.deepEqual(nsSelector(byName(p, 'sidecar-injector.ns.team-a.proxy-pod')).at(-1), {
      key: 'kubernetes.io/metadata.name',
      operator: 'In',
      values: ['team-a'],
    });
    // team-a's own proxy shadows the cluster-wide one there: its image, and team-a's defaults.
    const teamA = JSON.stringify(byName(p, 'sidecar-injector.ns.team-a.proxy'));
    assert.match(teamA, /team-a-proxy:1/);
    assert.doesNotMatch(JSON.stringify(byName(p, 'sidecar-injector.ns.team-b.proxy')), /team-a-proxy/);
    assert.equal(byName(p, 'sidecar-injector.ns.team-a.proxy')['metadata'].labels['sidecar-injector.io/template-namespace'], 'team-a');
    // The validating policy of each view knows that view's templates.
    assert.match(JSON.stringify(byName(p, 'sidecar-injector.ns.team-b.validate')), /\\"agent\\", \\"log\\", \\"proxy\\"/);
    assert.match(JSON.stringify(byName(p, 'sidecar-injector-validate')), /\\"agent\\", \\"proxy\\"\]/);
    // One verdict per object: the cluster-wide templates once, a namespace's own with its namespace.
    assert.deepEqual(
      p.verdicts.map((v) => `${v.namespace ?? ''}/${v.template} ${v.detail}`),
      [
        '/agent sidecar-injector-agent',
        '/proxy sidecar-injector-proxy',
        'team-a/proxy sidecar-injector.ns.team-a.proxy',
        'team-b/log sidecar-injector.ns.team-b.log',
      ],
    );
  });

  it('compiles a directory as it did: no view of a namespace, bindings on no namespace name', async () => {
    const p = compilePolicies(await loadTemplateSet('templates'), { namespace: HOME });
    for (const o of objs(p).filter((o) => String(o['kind']).endsWith('Binding')))
      assert.ok(!nsSelector(o).some((r: Obj) => r['key'] === 'kubernetes.io/metadata.name'), o['metadata'].name);
  });

  it("binds a revision's policies as its webhook configurations: pods labelled with it, and unlabelled pods of namespaces labelled with it", async () => {
    const p = compilePolicies(await loadTemplateSet('templates'), { namespace: HOME, revision: 'canary' });
    assert.deepEqual(
      names(p).filter((n) => n.includes('proxy')),
      [
        'MutatingAdmissionPolicy/sidecar-injector.rev.canary.proxy',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.proxy-pod',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.proxy-namespace',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.proxy-pod-ns-revision',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.proxy-namespace-ns-revision',
      ],
    );
    const selectors = (name: string): unknown => {
      const r = byName(p, name)['spec'].matchResources;
      return [r.objectSelector.matchExpressions, r.namespaceSelector.matchExpressions];
    };
    const rev = { key: 'sidecar-injector.io/rev', operator: 'In', values: ['canary'] };
    const noRev = { key: 'sidecar-injector.io/rev', operator: 'DoesNotExist' };
    const podIn = { key: 'sidecar-injector.io/inject', operator: 'In', values: ['true'] };
    const nsNotIn = { key: 'sidecar-injector.io/inject', operator: 'NotIn', values: ['true'] };
    assert.deepEqual(selectors('sidecar-injector.rev.canary.proxy-pod'), [[podIn, rev], [nsNotIn]]);
    assert.deepEqual(selectors('sidecar-injector.rev.canary.proxy-pod-ns-revision'), [
      [podIn, noRev],
      [nsNotIn, rev],
    ]);
    // The default install leaves both alone.
    const plain = compilePolicies(await loadTemplateSet('templates'), { namespace: HOME });
    const r = byName(plain, 'sidecar-injector-proxy-pod')['spec'].matchResources;
    assert.deepEqual(
      [r.objectSelector.matchExpressions, r.namespaceSelector.matchExpressions],
      [
        [podIn, noRev],
        [nsNotIn, noRev],
      ],
    );
  });

  it('writes the mutating policies and their bindings in v1beta1 when asked; the validating policy stays v1 (GA since 1.30)', async () => {
    const p = compilePolicies(await loadTemplateSet('templates'), { namespace: HOME, apiVersion: PolicyApi.v1beta1 });
    const versions = new Set(objs(p).map((o) => `${o['kind']} ${o['apiVersion']}`));
    assert.deepEqual([...versions].sort(), [
      'MutatingAdmissionPolicy admissionregistration.k8s.io/v1beta1',
      'MutatingAdmissionPolicyBinding admissionregistration.k8s.io/v1beta1',
      'ValidatingAdmissionPolicy admissionregistration.k8s.io/v1',
      'ValidatingAdmissionPolicyBinding admissionregistration.k8s.io/v1',
    ]);
  });

  it("compiles one namespace's view alone, with the verdicts of its own templates", () => {
    const set = setOf(sct(HOME, 'proxy', 'registry.example.com/proxy:1'), sct('team-a', 'mesh', 'registry.example.com/mesh:1'));
    const p = compileNamespacePolicies(set.namespaces!.get('team-a')!, 'team-a', { namespace: HOME });
    assert.ok(
      names(p).every((n) => n.includes('/sidecar-injector.ns.team-a.')),
      names(p).join(' '),
    );
    assert.deepEqual(
      p.verdicts.map((v) => v.template),
      ['mesh'],
    );
  });

  it('binds a required template to every pod of its namespaces, without an opt-in, and holds it there with one validating policy for every view', () => {
    const agent = sct(HOME, 'agent', 'registry.example.com/agent:1', {
      required: { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['legacy'] }] } },
    });
    const p = compilePolicies(setOf(agent, sct('team-a', 'mesh', 'registry.example.com/mesh:1')), { namespace: HOME });
    assert.deepEqual(
      names(p).filter((n) => n.includes('agent') || n.includes('required')),
      [
        'MutatingAdmissionPolicy/sidecar-injector-agent',
        'MutatingAdmissionPolicyBinding/sidecar-injector-agent-required',
        'ValidatingAdmissionPolicy/sidecar-injector-validate-required',
        'ValidatingAdmissionPolicyBinding/sidecar-injector-validate-required-all',
        'MutatingAdmissionPolicy/sidecar-injector.ns.team-a.agent',
        'MutatingAdmissionPolicyBinding/sidecar-injector.ns.team-a.agent-required',
      ],
    );
    const binding = byName(p, 'sidecar-injector.ns.team-a.agent-required')['spec'].matchResources;
    assert.equal(binding.objectSelector, undefined, 'whatever the pod says');
    assert.deepEqual(binding.namespaceSelector.matchExpressions, [
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['legacy'] },
      { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a'] },
    ]);
    assert.equal(byName(p, 'sidecar-injector-validate-required-all')['spec'].matchResources.namespaceSelector.matchExpressions.length, 0);
    // The other templates order their items ahead of the required ones, which come last.
    assert.match(
      JSON.stringify(byName(p, 'sidecar-injector.ns.team-a.mesh')),
      /filter\(r, \(r == \\"agent\\" && \(!\(request.namespace in \[\\"legacy\\"\]\)\)\)\)/,
    );
    // A revision adds it to the pods that opt in to the revision; the default install holds every pod.
    const canary = compilePolicies(setOf(agent), { namespace: HOME, revision: 'canary' });
    assert.deepEqual(
      names(canary).filter((n) => n.includes('agent') || n.includes('required')),
      [
        'MutatingAdmissionPolicy/sidecar-injector.rev.canary.agent',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.agent-pod',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.agent-namespace',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.agent-pod-ns-revision',
        'MutatingAdmissionPolicyBinding/sidecar-injector.rev.canary.agent-namespace-ns-revision',
      ],
    );
  });

  it('hybrid: the validating policies check only the compiled templates and do not refuse a pod selecting one the webhook injects', async () => {
    const set = await loadTemplateSet('test/fixtures/cli/templates');
    const validating = (p: PolicySet): string => JSON.stringify(objs(p).filter((o) => o['kind'] === 'ValidatingAdmissionPolicy'));
    const alone = compilePolicies(set, { namespace: HOME });
    const hybrid = compilePolicies(set, { namespace: HOME, hybrid: true });
    assert.match(validating(alone), /are injected by the webhook only/);
    assert.doesNotMatch(validating(hybrid), /injected by the webhook only/);
    const messages = (p: PolicySet): string =>
      objs(p)
        .filter((o) => o['kind'] === 'ValidatingAdmissionPolicy')
        .flatMap((o) => o['spec'].validations.map((v: Obj) => v['messageExpression']))
        .join('\n');
    assert.doesNotMatch(messages(hybrid), /of template \\"log-agent/, 'no presence check of a webhook-only template');
    assert.match(messages(hybrid), /of template \\"mesh/, 'a compiled one is checked');
    assert.deepEqual(
      names(hybrid).filter((n) => n.startsWith('Mutating')),
      names(alone).filter((n) => n.startsWith('Mutating')),
    );
    // A required template that does not compile: refused everywhere alone, the webhook's to hold beside it.
    const required = setOf(sct(HOME, 'agent', 'registry.example.com/agent:1', { required: {}, containers: [], labels: { audited: 'true' } }));
    assert.match(validating(compilePolicies(required, { namespace: HOME })), /is injected by the webhook only/);
    assert.ok(!names(compilePolicies(required, { namespace: HOME, hybrid: true })).includes('ValidatingAdmissionPolicy/sidecar-injector-validate-required'));
  });

  it("refuses a template whose policy would take a validating policy's name", () => {
    const p = compilePolicies(setOf(sct(HOME, 'validate', 'registry.example.com/v:1')), { namespace: HOME });
    assert.deepEqual(p.verdicts, [
      {
        template: 'validate',
        compiles: false,
        detail: 'its policy would be named as the validating policy sidecar-injector-validate: rename the template',
      },
    ]);
    assert.equal(names(p).filter((n) => n === 'ValidatingAdmissionPolicy/sidecar-injector-validate').length, 1);
  });

  describe('one template never stops the others', () => {
    // The template schema lets a null list item through (the CRD's items are nullable); CEL has no null string.
    const nullArgs = (namespace: string): Obj =>
      sct(namespace, 'nullargs', 'registry.example.com/n:1', { containers: [{ name: 'nullargs', image: 'busybox:1.36', args: ['a', null] }] });

    it('a template whose policy would be too large for the apiserver to store is not compiled, with the reason; the others compile', () => {
      const args = Array.from({ length: 40 }, (_, i) => `${i}`.padEnd(30_000, 'x'));
      const p = compilePolicies(
        setOf(
          sct(HOME, 'huge', 'registry.example.com/h:1', { containers: [{ name: 'huge', image: 'registry.example.com/h:1', args }] }),
          sct(HOME, 'proxy', 'registry.example.com/proxy:1'),
        ),
        { namespace: HOME },
      );
      const verdict = p.verdicts.find((v) => v.template === 'huge')!;
      assert.equal(verdict.compiles, false);
      assert.match(verdict.detail, /^its MutatingAdmissionPolicy would hold \d+ bytes as JSON, over the 1048576 a policy may hold here/);
      assert.ok(names(p).includes('MutatingAdmissionPolicy/sidecar-injector-proxy'));
      assert.ok(!names(p).some((n) => n.includes('huge')));
    });

    it('measures the policy as it is written, its template-source annotation included', () => {
      // 78 containers of 63-character names and a 100,000-character arg: the policy holds 995,114
      // bytes without its source annotation (107,126 bytes of spec, under the 128 KiB it may hold), 1,102,911 with it.
      const containers: Obj[] = Array.from({ length: 78 }, (_, i) => ({ name: `c${i}`.padEnd(63, 'c'), image: 'registry.example.com/c:1' }));
      containers[0] = { ...containers[0], args: ['x'.repeat(100_000)] };
      const p = compilePolicies(setOf(sct(HOME, 'wide', 'registry.example.com/w:1', { containers }), sct(HOME, 'proxy', 'registry.example.com/proxy:1')), {
        namespace: HOME,
      });
      const verdict = p.verdicts.find((v) => v.template === 'wide')!;
      assert.equal(verdict.compiles, false, 'not compiled');
      const bytes = Number(/^its MutatingAdmissionPolicy would hold (\d+) bytes as JSON, over the 1048576/.exec(verdict.detail)?.[1]);
      assert.ok(bytes > 1024 * 1024 && bytes < 1024 * 1024 + 128 * 1024, verdict.detail);
      for (const o of objs(p)) assert.ok(Buffer.byteLength(JSON.stringify(o)) <= 1024 * 1024, o['metadata'].name);
      assert.ok(names(p).includes('MutatingAdmissionPolicy/sidecar-injector-proxy'));
    });

    it('a value with no CEL form makes its template alone not compiled, naming the template and the JSON path; the others compile', () => {
      const p = compilePolicies(setOf(nullArgs(HOME), sct(HOME, 'proxy', 'registry.example.com/proxy:1')), { namespace: HOME });
      const verdict = p.verdicts.find((v) => v.template === 'nullargs')!;
      assert.equal(verdict.compiles, false);
      assert.equal(verdict.detail, '/spec/containers/0/args/1: null has no CEL form in a policy: give it a value or remove it');
      assert.equal(verdict.error?.code, 'TEMPLATE_NOT_COMPILED');
      assert.equal(verdict.error?.message, `template "nullargs" does not compile to a policy: ${verdict.detail}`);
      assert.ok(names(p).includes('MutatingAdmissionPolicy/sidecar-injector-proxy'));
      assert.ok(!names(p).some((n) => n.includes('nullargs')));
      // Policy mode: a pod that selects it is refused rather than let through without it.
      assert.match(JSON.stringify(byName(p, 'sidecar-injector-validate')['spec'].validations), /\[\\"nullargs\\"\]/);
      assert.deepEqual(p.unsynced, []);
    });

    it("one team's template that does not compile leaves the other namespaces' and the cluster-wide policies compiled", () => {
      const p = compilePolicies(
        setOf(
          sct(HOME, 'proxy', 'registry.example.com/proxy:1'),
          nullArgs('team-a'),
          sct('team-a', 'log', 'registry.example.com/log:1'),
          sct('team-b', 'log', 'registry.example.com/log:1'),
        ),
        { namespace: HOME },
      );
      for (const name of ['sidecar-injector-proxy', 'sidecar-injector.ns.team-a.log', 'sidecar-injector.ns.team-b.log', 'sidecar-injector.ns.team-a.validate'])
        assert.ok(byName(p, name) !== undefined, name);
      assert.deepEqual(
        p.verdicts.filter((v) => !v.compiles).map((v) => [v.namespace, v.template]),
        [['team-a', 'nullargs']],
      );
    });

    it("a template whose objects would be named beyond the apiserver's 253 characters is not compiled, with the reason", () => {
      const long = 'a'.repeat(230);
      const p = compilePolicies(
        setOf(
          sct(HOME, long, 'registry.example.com/l:1', { containers: [{ name: 'long', image: 'registry.example.com/l:1' }] }),
          sct(HOME, 'proxy', 'registry.example.com/proxy:1'),
        ),
        { namespace: HOME },
      );
      const verdict = p.verdicts.find((v) => v.template === long)!;
      assert.equal(verdict.compiles, false);
      assert.match(
        verdict.detail,
        /^\/metadata\/name: its objects would be named sidecar-injector-a+-namespace \(257 characters\), and the apiserver accepts only DNS-1123 subdomains of at most 253/,
      );
      for (const o of objs(p)) assert.ok((o['metadata'].name as string).length <= 253, o['metadata'].name);
      assert.ok(names(p).includes('MutatingAdmissionPolicy/sidecar-injector-proxy'));
    });

    it("what a template's compile throws otherwise makes that template alone not compiled", () => {
      const set = setOf(sct(HOME, 'proxy', 'registry.example.com/proxy:1'), sct(HOME, 'agent', 'registry.example.com/agent:1'));
      // A fault the verdict does not foresee: the mutating policy reading a field that throws.
      Object.defineProperty(set.templates.get('agent')!, 'version', {
        get: () => {
          throw new Error('boom');
        },
      });
      const p = compilePolicies(set, { namespace: HOME });
      assert.deepEqual(
        p.verdicts.map((v) => [v.template, v.compiles, v.detail, v.error?.message]),
        [
          ['agent', false, 'boom', 'template "agent" does not compile to a policy: boom'],
          ['proxy', true, 'sidecar-injector-proxy', undefined],
        ],
      );
      assert.ok(names(p).includes('MutatingAdmissionPolicy/sidecar-injector-proxy'));
    });

    it("a namespace's view that throws compiles to nothing, its objects left as they are; the other views compile", () => {
      const set = setOf(
        sct(HOME, 'proxy', 'registry.example.com/proxy:1'),
        sct('team-a', 'log', 'registry.example.com/log:1'),
        sct('team-b', 'log', 'registry.example.com/log:1'),
      );
      // Read by the view's context, which every template's policy of the view shares.
      Object.defineProperty(set.namespaces!.get('team-a')!.templates.get('log')!, 'placement', {
        get: () => {
          throw new Error('boom');
        },
      });
      const p = compilePolicies(set, { namespace: HOME });
      assert.deepEqual(p.unsynced, ['team-a']);
      assert.ok(!names(p).some((n) => n.includes('.team-a.')));
      for (const name of ['sidecar-injector-proxy', 'sidecar-injector.ns.team-b.log', 'sidecar-injector-validate'])
        assert.ok(byName(p, name) !== undefined, name);
      assert.deepEqual(
        p.verdicts.filter((v) => !v.compiles).map((v) => [v.namespace, v.template, v.detail]),
        [['team-a', 'log', 'its view (namespace team-a) does not compile: boom']],
      );
    });
  });

  it('names: no two installs or views share an object name, whatever the template names (a template name may hold "-" and ".")', () => {
    const all = (p: PolicySet): string[] => names(p);
    // The default install's template x-canary, and revision canary's template x.
    const byDefault = all(compilePolicies(setOf(sct(HOME, 'x-canary', 'registry.example.com/x:1')), { namespace: HOME }));
    const byCanary = all(compilePolicies(setOf(sct(HOME, 'x', 'registry.example.com/x:1')), { namespace: HOME, revision: 'canary' }));
    assert.ok(byDefault.includes('MutatingAdmissionPolicy/sidecar-injector-x-canary'), byDefault.join(' '));
    assert.ok(byCanary.includes('MutatingAdmissionPolicy/sidecar-injector.rev.canary.x'), byCanary.join(' '));
    // A cluster-wide template x.team-a, and namespace team-a's own template x.
    const views = all(
      compilePolicies(
        setOf(
          sct(HOME, 'x.team-a', 'registry.example.com/x:1', { containers: [{ name: 'x', image: 'registry.example.com/x:1' }] }),
          sct('team-a', 'x', 'registry.example.com/x:1'),
        ),
        { namespace: HOME },
      ),
    );
    assert.ok(views.includes('MutatingAdmissionPolicy/sidecar-injector-x.team-a'), views.join(' '));
    assert.ok(views.includes('MutatingAdmissionPolicy/sidecar-injector.ns.team-a.x'), views.join(' '));
    // Revision canary's view of namespace team-a, and revision canary's cluster-wide template team-a.x.
    const revViews = all(
      compilePolicies(
        setOf(
          sct(HOME, 'team-a.x', 'registry.example.com/x:1', { containers: [{ name: 'x', image: 'registry.example.com/x:1' }] }),
          sct('team-a', 'x', 'registry.example.com/x:1'),
        ),
        {
          namespace: HOME,
          revision: 'canary',
        },
      ),
    );
    assert.ok(revViews.includes('MutatingAdmissionPolicy/sidecar-injector.rev.canary.team-a.x'), revViews.join(' '));
    assert.ok(revViews.includes('MutatingAdmissionPolicy/sidecar-injector.rev-ns.canary.team-a.x'), revViews.join(' '));
    for (const [what, list] of [
      ['default x-canary against canary x', [...byDefault, ...byCanary]],
      ['cluster-wide x.team-a against team-a x', views],
      ['canary team-a.x against canary team-a x', revViews],
    ] as const)
      assert.equal(new Set(list).size, list.length, `${what}: ${list.filter((n, i) => list.indexOf(n) !== i).join(', ')}`);
    const subdomain = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
    for (const n of [...byDefault, ...byCanary, ...views, ...revViews]) assert.match(n.split('/')[1]!, subdomain, 'an object name is a DNS subdomain');
  });
});
