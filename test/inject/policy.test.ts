import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InjectorError } from '../../src/errors.js';
import { OptInScope, Reason, parseNames, refusalReason, selectTemplates } from '../../src/inject/policy.js';
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

const set = (...docs: string[]): TemplateSet => compileTemplateSet(docs.map((text, i) => ({ file: `t${i}.yaml`, text })), 'test');
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
      for (const [scope, expected] of [[OptInScope.Pod, podScope], [OptInScope.Namespace, namespaceScope]] as const) {
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

  it('gives the named templates in the annotation\'s order instead of the defaults', () => {
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
      (err: unknown) => err instanceof InjectorError && err.code === 'TEMPLATE_UNKNOWN' && err.message === 'unknown sidecar template(s) "nope", "gone" named in annotation sidecar-injector.io/templates; known templates: debug, logs, proxy',
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
