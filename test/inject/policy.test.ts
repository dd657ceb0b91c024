import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InjectorError } from '../../src/errors.js';
import { keyWarnings, OptInScope, Reason, parseNames, refusalReason, selectTemplates } from '../../src/inject/policy.js';
import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';

function template(name: string, isDefault: boolean): string {
  return `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: ${name}
spec:
  default: ${isDefault}
  containers:
    - name: ${name}
      image: registry.example.com/${name}:1.0
`;
}

const set = (...docs: string[]): TemplateSet =>
  compileTemplateSet(
    docs.map((text, i) => ({ file: `t${i}.yaml`, text })),
    'test',
  );
const twoDefaults = set(template('proxy', true), template('logs', true), template('debug', false));
const noDefaults = set(template('debug', false));

function pod(labels: Record<string, string> | undefined, annotations?: Record<string, string>): any {
  return { metadata: { ...(labels && { labels }), ...(annotations && { annotations }) }, spec: { containers: [{ name: 'app', image: 'app' }] } };
}

const names = (s: ReturnType<typeof selectTemplates>): string[] => (s.inject ? s.templates.map((t) => t.name) : []);

describe('selectTemplates: who opts a pod in, per scope', () => {
  // [labels, pod scope, namespace scope]
  const cases: [string, Record<string, string> | undefined, string, string][] = [
    ['no label', undefined, Reason.NotOptedIn, 'in'],
    ['the label "true"', { 'sidecar-injector.io/inject': 'true' }, 'in', 'in'],
    ['the label "false"', { 'sidecar-injector.io/inject': 'false' }, Reason.OptedOut, Reason.OptedOut],
    ['the label "True" (not "true")', { 'sidecar-injector.io/inject': 'True' }, Reason.OptedOut, Reason.OptedOut],
    ['the label "" (empty)', { 'sidecar-injector.io/inject': '' }, Reason.OptedOut, Reason.OptedOut],
    ['other labels only', { app: 'web' }, Reason.NotOptedIn, 'in'],
  ];
  for (const [title, labels, podScope, namespaceScope] of cases) {
    it(`with ${title}: ${podScope} on /mutate, ${namespaceScope} on /mutate/namespace`, () => {
      for (const [scope, expected] of [
        [OptInScope.Pod, podScope],
        [OptInScope.Namespace, namespaceScope],
      ] as const) {
        const s = selectTemplates(pod(labels), twoDefaults, scope);
        assert.equal(s.inject ? 'in' : s.reason, expected, scope);
      }
    });
  }

  it('defaults to the pod scope', () => {
    assert.equal(selectTemplates(pod(undefined), twoDefaults).inject, false);
  });

  it('says in its detail how the pod opted in', () => {
    const byLabel = selectTemplates(pod({ 'sidecar-injector.io/inject': 'true' }), twoDefaults);
    assert.ok(byLabel.inject && byLabel.optedIn === 'label sidecar-injector.io/inject="true"');
    const byNamespace = selectTemplates(pod(undefined), twoDefaults, OptInScope.Namespace);
    assert.ok(byNamespace.inject && /the namespace is labelled/.test(byNamespace.optedIn));
  });

  it('never reads a label inherited from Object.prototype', () => {
    const labels = Object.create({ 'sidecar-injector.io/inject': 'true' }) as Record<string, string>;
    assert.equal(selectTemplates(pod(labels), twoDefaults).inject, false);
  });
});

describe('selectTemplates: which templates', () => {
  const optedIn = { 'sidecar-injector.io/inject': 'true' };

  it('gives the default templates, in name order, when the pod names none', () => {
    const s = selectTemplates(pod(optedIn), twoDefaults);
    assert.deepEqual(names(s), ['logs', 'proxy']);
    assert.ok(s.inject && !s.explicit);
  });

  it("gives the named templates in the annotation's order instead of the defaults", () => {
    const s = selectTemplates(pod(optedIn, { 'sidecar-injector.io/templates': 'debug, proxy' }), twoDefaults);
    assert.deepEqual(names(s), ['debug', 'proxy']);
    assert.ok(s.inject && s.explicit);
  });

  it('treats a blank annotation as naming none', () => {
    assert.deepEqual(names(selectTemplates(pod(optedIn, { 'sidecar-injector.io/templates': ' , ' }), twoDefaults)), ['logs', 'proxy']);
  });

  it('skips a pod that names none when no template is a default', () => {
    const s = selectTemplates(pod(optedIn), noDefaults);
    assert.equal(s.inject ? 'in' : s.reason, Reason.NoTemplates);
  });

  it('refuses unknown names, naming every one and the known templates', () => {
    assert.throws(
      () => selectTemplates(pod(optedIn, { 'sidecar-injector.io/templates': 'proxy,nope,gone' }), twoDefaults),
      (err: unknown) =>
        err instanceof InjectorError &&
        err.code === 'TEMPLATE_UNKNOWN' &&
        err.message === 'unknown sidecar template(s) "nope", "gone" named in annotation sidecar-injector.io/templates; known templates: debug, logs, proxy',
    );
  });

  it('names at most five unknown names, each cut to 63 characters, and how many more, whatever the annotation holds', () => {
    const names = ['x'.repeat(5000), ...Array.from({ length: 20_000 }, (_, i) => `t${i}`)].join(',');
    assert.throws(
      () => selectTemplates(pod(optedIn, { 'sidecar-injector.io/templates': names }), twoDefaults),
      (err: unknown) =>
        err instanceof InjectorError &&
        err.message ===
          `unknown sidecar template(s) "${'x'.repeat(63)}...(4937 more)", "t0", "t1", "t2", "t3" and 19996 more named in annotation sidecar-injector.io/templates; known templates: debug, logs, proxy`,
    );
  });

  it('does not look at the annotation of a pod that has not opted in', () => {
    assert.equal(selectTemplates(pod(undefined, { 'sidecar-injector.io/templates': 'nope' }), twoDefaults).inject, false);
  });
});

describe('parseNames', () => {
  it('splits on commas, trims, drops blanks and keeps the first mention of a name', () => {
    assert.deepEqual(parseNames(' b ,a,,b, c '), ['b', 'a', 'c']);
    assert.deepEqual(parseNames(''), []);
    assert.deepEqual(parseNames(',,'), []);
  });
});

describe('refusalReason', () => {
  it('maps each refusal to its Reason and any other error to its code', () => {
    assert.equal(refusalReason(new InjectorError('OVERRIDE_REFUSED', ['x'])), Reason.OverrideRefused);
    assert.equal(refusalReason(new InjectorError('TEMPLATE_CONFLICT', ['x'])), Reason.TemplateConflict);
    assert.equal(refusalReason(new InjectorError('TEMPLATE_VOLUME_MISSING', ['x'])), Reason.VolumeMissing);
    assert.equal(refusalReason(new InjectorError('INTERNAL', ['x'])), 'INTERNAL');
  });
});

describe('keyWarnings: keys that look meant for the injector but are not its own (issue 21)', () => {
  const opted = { 'sidecar-injector.io/inject': 'true' };
  const warn = (labels: Record<string, string> | undefined, annotations?: Record<string, string>, selected?: string[]): readonly string[] =>
    keyWarnings(
      pod(labels, annotations),
      twoDefaults,
      selected?.map((n) => twoDefaults.templates.get(n)!),
    );

  it('names the key a typo of the templates annotation probably meant, while the pod gets the default templates', () => {
    const typo = pod(opted, { 'sidecar-injector.io/template': 'debug' });
    assert.deepEqual(names(selectTemplates(typo, twoDefaults)), ['logs', 'proxy'], 'the defaults, as before');
    assert.deepEqual(keyWarnings(typo, twoDefaults), [
      'annotation "sidecar-injector.io/template" is not read by the injector; did you mean "sidecar-injector.io/templates"?',
    ]);
  });

  // [what, labels, annotations, the warning]
  const cases: [string, Record<string, string>, Record<string, string>, RegExp][] = [
    [
      'a near-miss prefix (.com)',
      opted,
      { 'sidecar-injector.com/templates': 'debug' },
      /"sidecar-injector\.com\/templates" is not read by the injector; did you mean "sidecar-injector\.io\/templates"\?$/,
    ],
    ['a prefix without its dash', opted, { 'sidecarinjector.io/templates': 'debug' }, /did you mean "sidecar-injector\.io\/templates"/],
    [
      'a prefix with a dot for its dash',
      { 'sidecar.injector.io/inject': 'true' },
      {},
      /^label "sidecar\.injector\.io\/inject" is not read by the injector; did you mean "sidecar-injector\.io\/inject"\?$/,
    ],
    [
      'the inject label written as an annotation',
      {},
      { 'sidecar-injector.io/inject': 'true' },
      /^annotation "sidecar-injector\.io\/inject" .*did you mean the label "sidecar-injector\.io\/inject"\?$/,
    ],
    [
      'the templates annotation written as a label',
      { ...opted, 'sidecar-injector.io/templates': 'debug' },
      {},
      /^label "sidecar-injector\.io\/templates" .*did you mean the annotation "sidecar-injector\.io\/templates"\?$/,
    ],
    [
      'an unknown key under the prefix',
      opted,
      { 'sidecar-injector.io/enabled': 'yes' },
      /^annotation "sidecar-injector\.io\/enabled" is not read by the injector: its annotation is sidecar-injector\.io\/templates$/,
    ],
    [
      'an override of a template that does not exist',
      opted,
      { 'prxy.sidecar-injector.io/cpu': '1' },
      /"prxy\.sidecar-injector\.io\/cpu" is not read by the injector; did you mean "proxy\.sidecar-injector\.io\/cpu"\?/,
    ],
    [
      'an override written as a label',
      { ...opted, 'proxy.sidecar-injector.io/cpu': '1' },
      {},
      /^label "proxy\.sidecar-injector\.io\/cpu" .*did you mean the annotation/,
    ],
    ['an override under a near-miss prefix', opted, { 'proxy.sidecar-injector.com/memory': '1Gi' }, /did you mean "proxy\.sidecar-injector\.io\/memory"\?/],
    [
      'an inject label neither "true" nor "false"',
      { 'sidecar-injector.io/inject': 'yes' },
      {},
      /^label sidecar-injector\.io\/inject="yes" leaves the pod alone: only "true" opts it in$/,
    ],
  ];
  for (const [what, labels, annotations, warning] of cases) {
    it(`warns of ${what}, naming the key it probably meant`, () => {
      const found = warn(labels, annotations);
      assert.equal(found.length, 1, JSON.stringify(found));
      assert.match(found[0]!, warning);
    });
  }

  it('warns of an override of a template the pod does not get', () => {
    assert.deepEqual(warn(opted, { 'debug.sidecar-injector.io/cpu': '1' }, ['proxy']), [
      'annotation "debug.sidecar-injector.io/cpu" is not read by the injector: template "debug" is not selected for this pod',
    ]);
    assert.deepEqual(warn(opted, { 'debug.sidecar-injector.io/cpu': '1' }, ['debug']), [], 'read when it is selected');
  });

  it("says nothing of the contract's own keys, of other projects' keys, or of keys a template adds or reads", () => {
    const annotations = {
      'sidecar-injector.io/templates': 'proxy',
      'sidecar-injector.io/status': '{}',
      'proxy.sidecar-injector.io/cpu': '1',
      'sidecar.istio.io/inject': 'false',
      'sidecar-injector.expedia.com/inject': 'true',
      'kubectl.kubernetes.io/default-container': 'app',
      'injector.example.com/templates': 'x',
      'sidecar-injector.io': 'no slash',
    };
    assert.deepEqual(warn({ ...opted, 'proxy.sidecar-injector.io/version': '1' }, annotations, ['proxy']), []);
    const own = set(`${template('agent', true)}  annotations:\n    sidecar-injector.io/agent-version: "2"\n`);
    assert.deepEqual(keyWarnings(pod(opted, { 'sidecar-injector.io/agent-version': '2' }), own), [], 'a template may set a key under the prefix');
  });

  it('gives at most five warnings and says there are more, however many keys look meant for the injector', () => {
    const annotations = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`sidecar-injector.io/k${i}`, 'x']));
    const found = warn(opted, annotations);
    assert.equal(found.length, 6);
    assert.equal(found[5], 'more keys of the pod look meant for the injector; only the first 5 are named');
    assert.deepEqual(warn(opted, Object.fromEntries(Object.entries(annotations).slice(0, 5))).length, 5, 'five are all named');
    assert.ok(
      found.every((w) => w.length <= 200),
      JSON.stringify(found),
    );
  });

  it('shortens a long key in its warning', () => {
    const key = `sidecar-injector.io/${'x'.repeat(63)}`;
    const [found] = warn(opted, { [key]: 'x' });
    assert.ok(found !== undefined && !found.includes(key) && found.includes('...'), found);
  });
});
