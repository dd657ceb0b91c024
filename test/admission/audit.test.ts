import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fjp from 'fast-json-patch';
import { auditAnnotations, AuditKeys } from '../../src/admission/audit.js';
import type { AdmissionRequest } from '../../src/admission/codec.js';
import { loadTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, mutate, optedInPod, podReview, validate } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const requestOf = (pod: object, opts: Parameters<typeof podReview>[1] = {}): AdmissionRequest => podReview(pod, opts).request;

describe('audit annotations', () => {
  let set: TemplateSet;
  before(async () => {
    set = await loadTemplateSet('templates');
  });

  it('name the injected templates', () => {
    const r = mutate(requestOf(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'proxy,log-shipper' } })), set);
    assert.deepEqual(r.response.auditAnnotations, { decision: 'injected', reason: 'injected', templates: 'proxy,log-shipper' });
  });

  it('say why a pod was skipped, without a templates entry', () => {
    const r = mutate(requestOf({ metadata: { name: 'plain' }, spec: { containers: [{ name: 'a', image: 'a' }] } }), set);
    assert.deepEqual(r.response.auditAnnotations, { decision: 'skipped', reason: 'not-opted-in' });
    const opted = mutate(requestOf(optedInPod({ labels: { 'sidecar-injector.io/inject': 'false' } })), set);
    assert.deepEqual(opted.response.auditAnnotations, { decision: 'skipped', reason: 'opted-out' });
  });

  it('say why a pod was denied', () => {
    const r = mutate(requestOf(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'nope' } })), set);
    assert.equal(r.response.allowed, false);
    assert.deepEqual(r.response.auditAnnotations, { decision: 'denied', reason: 'unknown-template' });
  });

  it('mark a re-invoked review that found the sidecars already there', () => {
    const pod = optedInPod();
    const first = mutate(requestOf(pod), set);
    const injected = fjp.applyPatch(pod, decodePatch(first.response), false, false).newDocument;
    const again = mutate(requestOf(injected), set);
    assert.equal(again.response.patch, undefined);
    assert.deepEqual(again.response.auditAnnotations, { decision: 'injected', reason: 'already-injected', templates: 'log-shipper' });
  });

  it('on /validate, name the templates a rejected pod lacks and those an accepted pod has', () => {
    const pod = optedInPod();
    const missing = validate(requestOf(pod), set);
    assert.equal(missing.response.allowed, false);
    assert.deepEqual(missing.response.auditAnnotations, { decision: 'denied', reason: 'sidecars-missing', templates: 'log-shipper' });
    const injected = fjp.applyPatch(pod, decodePatch(mutate(requestOf(pod), set).response), false, false).newDocument;
    const present = validate(requestOf(injected), set);
    assert.deepEqual(present.response.auditAnnotations, { decision: 'allowed', reason: 'sidecars-present', templates: 'log-shipper' });
  });

  it('use keys the apiserver accepts after prefixing them with the webhook name', () => {
    // The name part of a Kubernetes qualified name (apimachinery validation.IsQualifiedName).
    for (const key of Object.values(AuditKeys)) assert.match(key, /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/);
  });
});

describe('the AdmissionReview on the wire', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  it('carries the audit annotations and warnings', async () => {
    const pod = optedInPod({ annotations: { 'fluentbit.io/exclude': 'false' } });
    const res = await httpsRequest(`${server.url}/mutate`, JSON.stringify(podReview(pod)), { ca: server.certs.ca.certPem });
    const { response } = res.json();
    assert.deepEqual(response.auditAnnotations, { decision: 'injected', reason: 'injected', templates: 'log-shipper' });
    assert.equal(response.warnings.length, 1);
    assert.match(response.warnings[0], /fluentbit\.io\/exclude/);
  });
});

describe('auditAnnotations', () => {
  it('name the decision, the reason and the templates, if any', () => {
    const names = ['proxy', 'log-shipper'];
    assert.deepEqual(auditAnnotations('injected', 'injected', names), { decision: 'injected', reason: 'injected', templates: 'proxy,log-shipper' });
    assert.deepEqual(auditAnnotations('injected', 'already-injected', names), {
      decision: 'injected',
      reason: 'already-injected',
      templates: 'proxy,log-shipper',
    });
    assert.deepEqual(auditAnnotations('skipped', 'not-opted-in', []), { decision: 'skipped', reason: 'not-opted-in' });
  });

  it('names what a list that is not frozen holds now, though it changed since its last answer', () => {
    const names = ['proxy'];
    assert.equal(auditAnnotations('allowed', 'sidecars-present', names)[AuditKeys.templates], 'proxy');
    names.push('log-shipper');
    assert.equal(auditAnnotations('allowed', 'sidecars-present', names)[AuditKeys.templates], 'proxy,log-shipper');
  });
});
