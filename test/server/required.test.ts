import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fastJsonPatch from 'fast-json-patch';
import { HOME, sct, eventually } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startClusterTestServer, type TestServer } from '../helpers/server.js';

const { applyPatch } = fastJsonPatch;

/**
 * A mandatory platform sidecar that teams try to drop, through the real server (HTTPS) with
 * templates from SidecarTemplate objects served by the API stand-in: the platform's `agent`
 * (injector namespace, `required` everywhere but namespace legacy) and `mesh` (a default); team-a
 * owns SidecarTemplates in its namespace. Each way of dropping `agent` is a case.
 */
describe('mandatory sidecars: a required cluster-wide template stays in every opted-in pod', () => {
  let api: FakeApiServer;
  let server: TestServer;

  const review = async (path: string, pod: object, namespace: string): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(podReview(pod, { namespace })), { ca: server.certs.ca.certPem });
    return res.json().response;
  };
  /** The sidecar containers /mutate adds to the pod, by name, or the denial. */
  const mutated = async (namespace: string, extra: Parameters<typeof optedInPod>[0] = {}): Promise<{ containers: string[]; pod: any } | string> => {
    const pod = optedInPod(extra);
    const response = await review('/mutate', pod, namespace);
    if (!response.allowed) return `denied: ${response.status?.message}`;
    const out = applyPatch(structuredClone(pod), decodePatch(response)).newDocument as any;
    const names = [...out.spec.containers, ...(out.spec.initContainers ?? [])]
      .map((c: any) => `${c.name}=${c.image}`)
      .filter((n: string) => !n.startsWith('web='));
    return { containers: names.sort(), pod: out };
  };
  const loaded = (namespace: string, name: string): any => api.template(namespace, name)?.status?.conditions?.find((c: any) => c.type === 'Loaded');

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(
      sct(HOME, 'agent', 'registry.example.com/agent:1', {
        overrides: ['cpu'],
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

  it('adds the required template to the defaults, and to the templates a pod names', async () => {
    const defaults = await mutated('team-b');
    assert.deepEqual(typeof defaults === 'string' ? defaults : defaults.containers, ['agent=registry.example.com/agent:1', 'mesh=registry.example.com/mesh:1']);
    const named = await mutated('team-b', { annotations: { 'sidecar-injector.io/templates': 'logger' } });
    assert.deepEqual(typeof named === 'string' ? named : named.containers, ['agent=registry.example.com/agent:1', 'logger=registry.example.com/logger:1']);
  });

  it("keeps it when a team's own default templates replace the cluster defaults", async () => {
    api.applyTemplate(sct('team-a', 'team-default', 'registry.example.com/team:1', { default: true }));
    await eventually(
      async () =>
        JSON.stringify(((await mutated('team-a')) as any).containers) ===
        JSON.stringify(['agent=registry.example.com/agent:1', 'team-default=registry.example.com/team:1']),
      'team-a defaults, with agent',
    );
  });

  it("refuses a team's template that would shadow it by name, in the object's status, and keeps serving the platform's", async () => {
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/pause:3'));
    await eventually(async () => loaded('team-a', 'agent')?.status === 'False', 'the shadowing object refused');
    assert.match(
      loaded('team-a', 'agent').message,
      /the cluster-wide template "agent" is required, and a namespace's template cannot replace it; rename this one/,
    );
    const got = await mutated('team-a', { annotations: { 'sidecar-injector.io/templates': 'agent' } });
    assert.deepEqual(typeof got === 'string' ? got : got.containers, ['agent=registry.example.com/agent:1']);
  });

  it("refuses a namespace's template that declares itself required: only the platform's can be", async () => {
    api.applyTemplate(sct('team-a', 'own-required', 'registry.example.com/x:1', { required: {} }));
    await eventually(async () => loaded('team-a', 'own-required')?.status === 'False', 'the object refused');
    assert.match(
      loaded('team-a', 'own-required').message,
      /only a cluster-wide template \(in namespace sidecar-injector or the templates directory\) can be required/,
    );
  });

  it('keeps its image whatever override a pod sets, and refuses a required template that would allow one', async () => {
    const got = await mutated('team-b', { annotations: { 'agent.sidecar-injector.io/image': 'registry.example.com/pause:3' } });
    assert.deepEqual(typeof got === 'string' ? got : got.containers, ['agent=registry.example.com/agent:1', 'mesh=registry.example.com/mesh:1']);
    api.applyTemplate(sct(HOME, 'agent2', 'registry.example.com/agent2:1', { overrides: ['image'], required: {} }));
    await eventually(async () => loaded(HOME, 'agent2')?.status === 'False', 'the object refused');
    assert.match(loaded(HOME, 'agent2').message, /a required template cannot let pods override its image/);
  });

  it('makes /validate refuse an opted-in pod without it, whatever the pod names, with one line naming the template and why', async () => {
    const logged = (await mutated('team-b', { annotations: { 'sidecar-injector.io/templates': 'logger' } })) as any;
    assert.equal((await review('/validate', logged.pod, 'team-b')).allowed, true);
    // The same pod as a team would create it past /mutate: its logger, no agent.
    const withoutAgent = structuredClone(logged.pod);
    withoutAgent.spec.containers = withoutAgent.spec.containers.filter((c: any) => c.name !== 'agent');
    const denied = await review('/validate', withoutAgent, 'team-b');
    assert.equal(denied.allowed, false);
    assert.equal(denied.status.code, 403);
    assert.equal(
      denied.status.message,
      'template "agent" is required in namespace team-b (its namespaceSelector takes it) by the platform\'s spec.required, and the pod lacks it (container "agent" (template "agent")); create the pod through the injector, whose /mutate adds it (it keeps a container or volume the pod already has under a name the template uses: remove that one from the pod)',
    );
    assert.doesNotMatch(denied.status.message, /\n/);
    // A container of that name with another image is no sidecar of the template.
    const impostor = structuredClone(logged.pod);
    impostor.spec.containers.find((c: any) => c.name === 'agent').image = 'registry.example.com/pause:3';
    assert.equal((await review('/validate', impostor, 'team-b')).allowed, false);
  });

  it('leaves pods the platform did not make it mandatory for: a namespace its selector leaves out, and a pod that opted out', async () => {
    const legacy = await mutated('legacy');
    assert.deepEqual(typeof legacy === 'string' ? legacy : legacy.containers, ['mesh=registry.example.com/mesh:1']);
    const out = optedInPod({ labels: { 'sidecar-injector.io/inject': 'false' } });
    assert.equal((await review('/validate/namespace', out, 'team-b')).allowed, true);
  });
});
