import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { MAX_OBJECT_BYTES } from '../../src/templates/cluster.js';
import { parseKubectl } from '../../src/yaml/kubectl.js';
import { DENIAL_MESSAGE_MAX } from '../../src/admission/verdict.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { eventually, HOME, sct } from '../helpers/sidecartemplates.js';
import { podReview, optedInPod } from '../helpers/review.js';
import { startClusterTestServer, type TestServer } from '../helpers/server.js';

const PATH = '/validate/sidecartemplates';

/** The AdmissionReview the kube-apiserver sends for a write of a SidecarTemplate (request fields in its order). */
function templateReview(obj: any, opts: { operation?: string; oldObject?: any; subResource?: string; apiVersion?: string; uid?: string } = {}): any {
  const gvk = { group: 'sidecar-injector.io', version: 'v1alpha1', kind: 'SidecarTemplate' };
  const gvr = { group: 'sidecar-injector.io', version: 'v1alpha1', resource: 'sidecartemplates' };
  const operation = opts.operation ?? 'CREATE';
  return {
    kind: 'AdmissionReview',
    apiVersion: opts.apiVersion ?? 'admission.k8s.io/v1',
    request: {
      uid: opts.uid ?? randomUUID(),
      kind: gvk,
      resource: gvr,
      ...(opts.subResource !== undefined && { subResource: opts.subResource }),
      requestKind: gvk,
      requestResource: gvr,
      name: obj?.metadata?.name ?? opts.oldObject?.metadata?.name,
      namespace: obj?.metadata?.namespace ?? opts.oldObject?.metadata?.namespace,
      operation,
      userInfo: { username: 'alice', groups: ['team-a', 'system:authenticated'] },
      object: operation === 'DELETE' ? null : obj,
      oldObject: opts.oldObject ?? null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: `${operation[0]}${operation.slice(1).toLowerCase()}Options` },
    },
  };
}

/** A corpus sidecar as a team's SidecarTemplate object in `namespace`, read as kubectl reads it (YAML 1.1: 0775 is octal). */
function corpus(file: string, namespace: string): any {
  const doc = parseKubectl(readFileSync(new URL(`../fixtures/corpus/sidecars/${file}`, import.meta.url), 'utf8'))[0]!.value as any;
  return { ...doc, metadata: { ...doc.metadata, namespace } };
}

/** The Loaded condition's faults, without the words that say what the store serves instead. */
function conditionFaults(message: string): string {
  return message.replace(/^not served \(the last valid version, if any, still is\): /, '');
}

/**
 * /validate/sidecartemplates through the real server over real TLS (certificates made in the test),
 * serving SidecarTemplate objects of the API stand-in: a write the injector's store would refuse
 * is denied with the words its Loaded condition carries, before it is stored.
 */
describe('the SidecarTemplate webhook refuses at write time what the injector would not load', () => {
  let api: FakeApiServer;
  let server: TestServer;

  const post = (body: string) => httpsRequest(`${server.url}${PATH}`, body, { ca: server.certs.ca.certPem });
  const answer = async (review: any): Promise<any> => {
    const res = await post(JSON.stringify(review));
    assert.equal(res.status, 200, res.text);
    const reply = res.json();
    assert.equal(reply.apiVersion, review.apiVersion);
    assert.equal(reply.kind, 'AdmissionReview');
    assert.equal(reply.response.uid, review.request.uid);
    assert.equal(reply.response.patch, undefined, 'a validating webhook never patches');
    return reply.response;
  };
  const loaded = (namespace: string, name: string): any => api.template(namespace, name)?.status?.conditions?.find((c: any) => c.type === 'Loaded');

  before(async () => {
    api = await startFakeApiServer();
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  it('allows every real-world sidecar of the corpus, created or updated, in v1 and v1beta1', async () => {
    for (const file of [
      'cloud-sql-proxy.yaml',
      'datadog-trace-agent.yaml',
      'fluent-bit.yaml',
      'istio-proxy.yaml',
      'linkerd-proxy.yaml',
      'oauth2-proxy.yaml',
      'vault-agent.yaml',
    ]) {
      const obj = corpus(file, 'team-a');
      for (const apiVersion of ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']) {
        const created = await answer(templateReview(obj, { apiVersion }));
        assert.equal(created.allowed, true, `${file}: ${created.status?.message}`);
        const updated = await answer(templateReview(obj, { apiVersion, operation: 'UPDATE', oldObject: obj }));
        assert.equal(updated.allowed, true, `${file}: ${updated.status?.message}`);
      }
    }
  });

  // Each case is an object the loader refuses for a reason of its own alone.
  const invalid: { what: string; spec: object; pattern: RegExp }[] = [
    {
      what: 'an unknown placeholder',
      spec: { containers: [{ name: 'agent', image: 'busybox:1', args: ['{{ pod.spec.nodeName }}'] }] },
      pattern: /\/spec\/containers\/0\/args\/0: .*unknown placeholder/,
    },
    {
      what: 'two containers of one name',
      spec: {
        containers: [
          { name: 'a', image: 'busybox:1' },
          { name: 'a', image: 'busybox:2' },
        ],
      },
      pattern: /duplicate container name "a"/,
    },
    { what: 'an image Kubernetes refuses', spec: { containers: [{ name: 'agent', image: 'Busybox:1' }] }, pattern: /\/spec\/containers\/0\/image/ },
    {
      what: 'restartPolicy on a template that is no native sidecar',
      spec: { containers: [{ name: 'a', image: 'busybox:1', restartPolicy: 'Always' }] },
      pattern: /\/spec\/containers\/0\/restartPolicy/,
    },
    {
      what: '{{ pod.name }} in a label value',
      spec: { labels: { 'owner-pod': '{{ pod.name }}' }, containers: [{ name: 'a', image: 'busybox:1' }] },
      pattern: /\/spec\/labels\/owner-pod: .*Kubernetes refuses as a label value/,
    },
    {
      what: 'spec.required in a team namespace',
      spec: { required: {}, containers: [{ name: 'a', image: 'busybox:1' }] },
      pattern: /\/spec\/required: only a cluster-wide template \(in namespace sidecar-injector/,
    },
  ];
  for (const c of invalid) {
    it(`denies ${c.what}, with the fault the object's Loaded condition states`, async () => {
      const name = `bad-${invalid.indexOf(c)}`;
      const obj = { ...sct('team-a', name, 'busybox:1'), spec: c.spec };
      const response = await answer(templateReview(obj, { operation: 'UPDATE', oldObject: sct('team-a', name, 'busybox:1') }));
      assert.equal(response.allowed, false);
      assert.equal(response.status.code, 400);
      assert.match(response.status.message, c.pattern);
      assert.ok(response.status.message.startsWith(`the injector would not serve SidecarTemplate team-a/${name}: `), response.status.message);
      // The same object stored past the webhook (as before it was installed): the store's own words.
      api.applyTemplate(obj);
      await eventually(() => loaded('team-a', name)?.status === 'False', `the Loaded condition of team-a/${name}`);
      assert.equal(response.status.message, `the injector would not serve SidecarTemplate team-a/${name}: ${conditionFaults(loaded('team-a', name).message)}`);
    });
  }

  it("allows spec.required on a template of the injector's namespace, the platform's", async () => {
    const response = await answer(templateReview(sct(HOME, 'agent', 'registry.example.com/agent:1', { required: {} })));
    assert.equal(response.allowed, true, response.status?.message);
  });

  it('denies an object over the per-object bound with the size alone, never compiling it', async () => {
    // A fault the compiler would report too (an unknown placeholder): only the size is named.
    const obj = sct('team-a', 'huge', 'busybox:1');
    obj.spec.containers[0].args = ['{{ pod.spec.nodeName }}'];
    obj.metadata.annotations = { note: 'x'.repeat(MAX_OBJECT_BYTES) };
    const response = await answer(templateReview(obj));
    assert.equal(response.allowed, false);
    assert.match(response.status.message, new RegExp(`over the injector's limit of ${MAX_OBJECT_BYTES} bytes as JSON`));
    assert.doesNotMatch(response.status.message, /placeholder/);
    assert.ok(response.status.message.length <= DENIAL_MESSAGE_MAX, `${response.status.message.length} characters`);
  });

  it('caps a denial that lists many faults, as every denial is', async () => {
    const containers = Array.from({ length: 200 }, (_, i) => ({ name: `c-${i}`, image: 'busybox:1', args: [`{{ pod.unknown${i} }}`] }));
    const response = await answer(templateReview({ ...sct('team-a', 'many', 'busybox:1'), spec: { containers } }));
    assert.equal(response.allowed, false);
    const { message } = response.status;
    assert.match(message, /^the injector would not serve SidecarTemplate team-a\/many: .*unknown placeholder/);
    assert.match(message.slice(DENIAL_MESSAGE_MAX), /^\.\.\.\(\d+ more\)$/, 'cut at DENIAL_MESSAGE_MAX characters, saying how much more there was');
  });

  it('allows a DELETE, and an update of the status subresource (the injector writes it)', async () => {
    const obj = { ...sct('team-a', 'bad-0', 'busybox:1'), spec: invalid[0]!.spec };
    assert.equal((await answer(templateReview(null, { operation: 'DELETE', oldObject: obj }))).allowed, true);
    assert.equal((await answer(templateReview(obj, { operation: 'UPDATE', oldObject: obj, subResource: 'status' }))).allowed, true);
  });

  it('allows an update that leaves the template as it was (a finalizer removed from an invalid object stored before the webhook), not one that changes it', async () => {
    const stored = { ...sct('team-a', 'old', 'busybox:1'), spec: invalid[0]!.spec };
    stored.metadata = { ...stored.metadata, finalizers: ['example.com/cleanup'], annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' } };
    const released = {
      ...stored,
      metadata: { ...stored.metadata, finalizers: [], annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"spec":{}}' } },
    };
    assert.equal((await answer(templateReview(released, { operation: 'UPDATE', oldObject: stored }))).allowed, true);
    const relabelled = { ...stored, metadata: { ...stored.metadata, labels: { team: 'a' } } };
    assert.equal((await answer(templateReview(relabelled, { operation: 'UPDATE', oldObject: stored }))).allowed, false, 'labels are part of the template');
    const edited = { ...stored, spec: { ...stored.spec, volumes: [{ name: 'v', emptyDir: {} }] } };
    assert.equal((await answer(templateReview(edited, { operation: 'UPDATE', oldObject: stored }))).allowed, false);
  });

  it("refuses a review of another kind with a 4xx naming the webhook's rules", async () => {
    const response = await answer(podReview(optedInPod(), { namespace: 'team-a' }));
    assert.equal(response.allowed, false);
    assert.equal(response.status.code, 400);
    assert.match(response.status.message, /\/validate\/sidecartemplates reviews sidecar-injector.io SidecarTemplate objects only, got pods/);
    const noObject = await answer({
      ...templateReview(sct('team-a', 'x', 'busybox:1')),
      request: { ...templateReview(sct('team-a', 'x', 'busybox:1')).request, object: 'text' },
    });
    assert.equal(noObject.allowed, false);
    assert.equal(noObject.status.code, 400);
  });

  it('answers a malformed review with HTTP 400, not a crash', async () => {
    for (const body of ['{"kind":"AdmissionReview"', '{}', JSON.stringify({ kind: 'AdmissionReview', apiVersion: 'admission.k8s.io/v1', request: {} })]) {
      const res = await post(body);
      assert.equal(res.status, 400, `${body}: ${res.text}`);
    }
    // The server still answers.
    assert.equal((await answer(templateReview(corpus('fluent-bit.yaml', 'team-a')))).allowed, true);
  });
});
