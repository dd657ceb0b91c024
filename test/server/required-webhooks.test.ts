import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fastJsonPatch from 'fast-json-patch';
import { HOME, sct } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startClusterTestServer, type TestServer } from '../helpers/server.js';

const { applyPatch } = fastJsonPatch;

/** A pod as a team writes it, with these labels and annotations and no inject label of its own unless given. */
function teamPod(labels: Record<string, string> = {}, annotations?: Record<string, string>): any {
  const pod = optedInPod({ labels, ...(annotations && { annotations }) });
  if (!Object.hasOwn(labels, 'sidecar-injector.io/inject')) delete pod.metadata.labels['sidecar-injector.io/inject'];
  return pod;
}

const AGENT_MISSING =
  'template "agent" is required in namespace team-b (its namespaceSelector takes it) by the platform\'s spec.required, and the pod lacks it (container "agent" (template "agent")); create the pod through the injector, whose /mutate adds it (it keeps a container or volume the pod already has under a name the template uses: remove that one from the pod)';

/**
 * The optional required webhooks (manifests/components/required, the chart's `required` values):
 * the apiserver sends them every pod of the namespaces the platform selected, whatever its labels,
 * so the pods that never reach /mutate and /validate (opted out, a revision nobody installed, a
 * namespace that did not opt in) still get the platform's `agent` (required everywhere but namespace
 * legacy), through the real server (HTTPS) with templates from SidecarTemplate objects.
 */
describe('required webhooks: /mutate/required and /validate/required hold the required templates for every pod', () => {
  let api: FakeApiServer;
  let server: TestServer;

  const review = async (path: string, pod: object, namespace: string): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(podReview(pod, { namespace })), { ca: server.certs.ca.certPem });
    assert.equal(res.status, 200, `${path} answers`);
    return res.json().response;
  };
  /** The pod once `path` patched it. */
  const through = async (path: string, pod: object, namespace: string): Promise<any> => {
    const response = await review(path, pod, namespace);
    assert.equal(response.allowed, true, `${path}: ${response.status?.message}`);
    return applyPatch(structuredClone(pod), decodePatch(response)).newDocument;
  };
  const sidecars = (pod: any): string[] =>
    [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]
      .map((c: any) => `${c.name}=${c.image}`)
      .filter((n: string) => !n.startsWith('web='))
      .sort();

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(
      sct(HOME, 'agent', 'registry.example.com/agent:1', {
        required: { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['legacy'] }] } },
      }),
    );
    api.applyTemplate(sct(HOME, 'mesh', 'registry.example.com/mesh:1', { default: true }));
    api.applyTemplate(sct(HOME, 'logger', 'registry.example.com/logger:1'));
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  const escapes: [string, any][] = [
    ['a pod labelled sidecar-injector.io/inject: "false"', teamPod({ 'sidecar-injector.io/inject': 'false' })],
    ['a pod labelled with a revision nobody installed', teamPod({ 'sidecar-injector.io/rev': 'nobody' })],
    ['a pod of a namespace that did not opt in, without the inject label', teamPod()],
    ['a pod that names other templates and opted out', teamPod({ 'sidecar-injector.io/inject': 'false' }, { 'sidecar-injector.io/templates': 'logger' })],
  ];
  for (const [what, pod] of escapes) {
    it(`gives ${what} the required sidecar alone, and /validate/required refuses it without`, async () => {
      const injected = await through('/mutate/required', pod, 'team-b');
      assert.deepEqual(sidecars(injected), ['agent=registry.example.com/agent:1']);
      assert.equal((await review('/validate/required', injected, 'team-b')).allowed, true);
      const denied = await review('/validate/required', pod, 'team-b');
      assert.equal(denied.allowed, false);
      assert.equal(denied.status.code, 403);
      assert.equal(denied.status.message, AGENT_MISSING);
    });
  }

  it('leaves alone the pods of a namespace the required selector leaves out', async () => {
    const pod = teamPod({ 'sidecar-injector.io/inject': 'false' });
    const response = await review('/mutate/required', pod, 'legacy');
    assert.equal(response.allowed, true);
    assert.equal(response.patch, undefined);
    assert.equal((await review('/validate/required', pod, 'legacy')).allowed, true);
  });

  it('refuses a pod over a review limit where a template is required, and lets the apiserver judge it where none is', async () => {
    const crowded = teamPod({ 'sidecar-injector.io/inject': 'false' });
    crowded.spec.containers = Array.from({ length: 251 }, (_, i) => ({ name: `c${i}`, image: 'nginx:1.27' }));
    for (const path of ['/mutate/required', '/validate/required']) {
      const enforced = await review(path, crowded, 'team-b');
      assert.equal(enforced.allowed, false, path);
      assert.equal(enforced.status.code, 400, path);
      assert.match(enforced.status.message, /max-containers/, path);
      assert.equal((await review(path, crowded, 'legacy')).allowed, true, path);
    }
  });

  it('agrees with /mutate in either order: no sidecar twice, and the status /mutate wrote stays', async () => {
    // /mutate first (its webhook comes first in the configuration): /mutate/required adds nothing.
    const full = await through('/mutate', optedInPod(), 'team-b');
    assert.deepEqual(sidecars(full), ['agent=registry.example.com/agent:1', 'mesh=registry.example.com/mesh:1']);
    const again = await review('/mutate/required', full, 'team-b');
    assert.equal(again.allowed, true);
    assert.equal(again.patch, undefined);
    // /mutate/required first, then /mutate, then /mutate/required reinvoked.
    const first = await through('/mutate/required', optedInPod(), 'team-b');
    const second = await through('/mutate', first, 'team-b');
    assert.deepEqual(sidecars(second), ['agent=registry.example.com/agent:1', 'mesh=registry.example.com/mesh:1']);
    assert.deepEqual(JSON.parse(second.metadata.annotations['sidecar-injector.io/status']).templates, ['mesh', 'agent']);
    assert.equal((await review('/mutate/required', second, 'team-b')).patch, undefined);
    assert.equal((await review('/validate', second, 'team-b')).allowed, true);
    assert.equal((await review('/validate/required', second, 'team-b')).allowed, true);
  });
});
