import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fastJsonPatch from 'fast-json-patch';
import { HOME, sct } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startClusterTestServer, type TestServer } from '../helpers/server.js';

const { applyPatch } = fastJsonPatch;

const AGENT = {
  name: 'agent',
  image: 'registry.example.com/agent:1',
  args: ['--enforce'],
  env: [
    { name: 'MODE', value: 'enforce' },
    { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  ],
  volumeMounts: [{ name: 'agent-policy', mountPath: '/etc/agent', readOnly: true }],
};
const POLICY = { name: 'agent-policy', configMap: { name: 'agent-policy' } };

/**
 * A team that cannot drop the platform's mandatory sidecar brings its own under the sidecar's name:
 * /mutate keeps a container the pod already has, so /validate must see that what runs under the
 * name is the template's sidecar, through the real server with the template from a SidecarTemplate
 * object, while what other admission commonly adds or rewrites is still allowed.
 */
describe("attack: a pod brings its own container under a required sidecar's name", () => {
  let api: FakeApiServer;
  let server: TestServer;

  const review = async (path: string, pod: object): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(podReview(pod, { namespace: 'team-a' })), { ca: server.certs.ca.certPem });
    return res.json().response;
  };
  /** The pod as /mutate leaves it, with `agent` as the team wrote it beside its web container. */
  const through = async (agent: object): Promise<any> => {
    const pod = optedInPod({ spec: { containers: [{ name: 'web', image: 'nginx:1.27' }, agent], volumes: [POLICY] } });
    const response = await review('/mutate', pod);
    assert.equal(response.allowed, true, response.status?.message);
    return applyPatch(structuredClone(pod), decodePatch(response)).newDocument;
  };
  /** The pod as the injector makes it, with `change` applied to its agent afterwards. */
  const injected = async (change: (agent: any) => void): Promise<any> => {
    const pod = optedInPod();
    const response = await review('/mutate', pod);
    const out = applyPatch(structuredClone(pod), decodePatch(response)).newDocument as any;
    change(out.spec.containers.find((c: any) => c.name === 'agent'));
    return out;
  };

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct(HOME, 'agent', AGENT.image, { required: {}, containers: [AGENT], volumes: [POLICY] }));
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  const impostors: [string, object][] = [
    ['another command', { ...AGENT, command: ['sleep', 'infinity'] }],
    ['no args', { ...AGENT, args: [] }],
    ['an env var of the template set again later', { ...AGENT, env: [...AGENT.env, { name: 'MODE', value: 'off' }] }],
    ['an env var of the template left out', { ...AGENT, env: AGENT.env.slice(1) }],
    ['another volume at a mount path of the template', { ...AGENT, volumeMounts: [{ name: 'own-policy', mountPath: '/etc/agent' }] }],
    ['a subPath of its own on a mount of the template', { ...AGENT, volumeMounts: [{ ...AGENT.volumeMounts[0], subPath: 'empty' }] }],
  ];
  for (const [what, agent] of impostors) {
    it(`refuses at /validate the template's name and image running ${what}`, async () => {
      const pod = await through(agent);
      const denied = await review('/validate', pod);
      assert.equal(denied.allowed, false);
      assert.equal(denied.status.code, 403);
      assert.match(
        denied.status.message,
        /^template "agent" is required in every namespace by the platform's spec\.required, and the pod lacks it \(container "agent" as its template renders it \(the pod's [^\n]+\) \(template "agent"\)\)/,
      );
    });
  }

  it("refuses at /validate the template's sidecar beside a volume of its own under the template volume's name", async () => {
    const pod = await through(AGENT);
    pod.spec.volumes = [{ name: 'agent-policy', configMap: { name: 'team-a-permissive-policy' } }];
    const denied = await review('/validate', pod);
    assert.equal(denied.allowed, false);
    assert.match(denied.status.message, /the pod lacks it \(volume "agent-policy" as its template defines it \(template "agent"\)\)/);
  });

  const statuses: [string, object][] = [
    [
      'a version no replica served',
      { templates: ['agent'], injected: [{ template: 'agent', namespace: HOME, version: 'forged', containers: { agent: 'registry.example.com/agent' } }] },
    ],
    ['the format of releases before template versions', { templates: ['agent'], digest: 'forged' }],
  ];
  for (const [what, status] of statuses) {
    it(`refuses at /validate/required an opted-out pod whose own status names ${what} for its impostor`, async () => {
      const pod = optedInPod({
        labels: { 'sidecar-injector.io/inject': 'false' },
        annotations: { 'sidecar-injector.io/status': JSON.stringify(status) },
        spec: {
          containers: [
            { name: 'web', image: 'nginx:1.27' },
            { ...AGENT, command: ['sleep', 'infinity'] },
          ],
          volumes: [POLICY],
        },
      });
      const mutated = await review('/mutate/required', pod);
      assert.equal(mutated.allowed, true, mutated.status?.message);
      const denied = await review('/validate/required', applyPatch(structuredClone(pod), decodePatch(mutated)).newDocument);
      assert.equal(denied.allowed, false);
      assert.equal(denied.status.code, 403);
      assert.match(
        denied.status.message,
        /the pod lacks it \(container "agent" as its template renders it \(the pod's container has command \["sleep","infinity"\] where the template has none\)/,
      );
    });
  }

  it('admits the injected sidecar with what other admission adds or rewrites: env vars, mounts, defaults, resources, probes, a pinned digest', async () => {
    const pod = await injected((agent) => {
      agent.env.push({ name: 'DD_AGENT_HOST', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } });
      agent.env[1].valueFrom.fieldRef.apiVersion = 'v1';
      agent.volumeMounts.push({ name: 'kube-api-access-x', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true });
      agent.resources = { requests: { cpu: '25m', memory: '40Mi' } };
      agent.readinessProbe = { httpGet: { path: '/app-health/agent/readyz', port: 15020 } };
      agent.image = `${AGENT.image}@sha256:${'a'.repeat(64)}`;
      agent.imagePullPolicy = 'IfNotPresent';
      agent.terminationMessagePath = '/dev/termination-log';
    });
    pod.spec.volumes.find((v: any) => v.name === 'agent-policy').configMap.defaultMode = 420;
    const verdict = await review('/validate', pod);
    assert.equal(verdict.allowed, true, verdict.status?.message);
  });
});

/**
 * The apiserver names a controller's pod (its generateName and 5 random characters) after the
 * mutating webhooks and before the validating ones (webhook-facts.md, "What arrives before
 * validation"): a required sidecar that reads {{ pod.name }} was rendered by /mutate with the
 * generateName, and /validate must not take the named pod's sidecar for an impostor.
 */
describe("a required sidecar that reads the pod's name, on a controller's pod", () => {
  let api: FakeApiServer;
  let server: TestServer;
  const NAMED = {
    ...AGENT,
    args: ['--enforce', '--pod={{ pod.name }}'],
    volumeMounts: [...AGENT.volumeMounts, { name: 'agent-policy', mountPath: '/run/agent/{{ pod.name }}', readOnly: true }],
  };
  /** NAMED as /mutate renders it for the pod, with `args` of the pod's own. */
  const holding = (args: string[]) => ({
    ...NAMED,
    args,
    volumeMounts: [...AGENT.volumeMounts, { name: 'agent-policy', mountPath: '/run/agent/web-7c9f8b6d4-', readOnly: true }],
  });

  const review = async (path: string, pod: object): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(podReview(pod, { namespace: 'team-a' })), { ca: server.certs.ca.certPem });
    return res.json().response;
  };
  /** `pod` through `mutatePath` (rendered with its generateName), then named as the apiserver names it before `validatePath`. */
  const admitted = async (pod: any, mutatePath: string, validatePath: string): Promise<any> => {
    const mutated = await review(mutatePath, pod);
    assert.equal(mutated.allowed, true, mutated.status?.message);
    const stored = applyPatch(structuredClone(pod), decodePatch(mutated)).newDocument as any;
    stored.metadata.name = `${stored.metadata.generateName}x2k9p`;
    return review(validatePath, stored);
  };

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct(HOME, 'agent', AGENT.image, { required: {}, containers: [NAMED], volumes: [POLICY] }));
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  it('admits at /validate the pod /mutate injected, once the apiserver has named it', async () => {
    const verdict = await admitted(optedInPod(), '/mutate', '/validate');
    assert.equal(verdict.allowed, true, verdict.status?.message);
  });

  it('admits at /validate/required the opted-out pod /mutate/required injected, once named', async () => {
    const verdict = await admitted(optedInPod({ labels: { 'sidecar-injector.io/inject': 'false' } }), '/mutate/required', '/validate/required');
    assert.equal(verdict.allowed, true, verdict.status?.message);
  });

  it('admits at /validate a workload injected ahead with `inject -f`, whose sidecar holds web-<hash>- for the name', async () => {
    const injectedAhead = {
      ...holding(['--enforce', '--pod=web-<hash>-']),
      volumeMounts: [...AGENT.volumeMounts, { name: 'agent-policy', mountPath: '/run/agent/web-<hash>-', readOnly: true }],
    };
    const pod = optedInPod({ spec: { containers: [{ name: 'web', image: 'nginx:1.27' }, injectedAhead], volumes: [POLICY] } });
    const verdict = await admitted(pod, '/mutate', '/validate');
    assert.equal(verdict.allowed, true, verdict.status?.message);
  });

  it('refuses a sidecar whose name part is right but another argument is not', async () => {
    const pod = optedInPod({
      spec: {
        containers: [{ name: 'web', image: 'nginx:1.27' }, holding(['--audit-only', '--pod=web-7c9f8b6d4-'])],
        volumes: [POLICY],
      },
    });
    const verdict = await admitted(pod, '/mutate', '/validate');
    assert.equal(verdict.allowed, false);
    assert.match(verdict.status.message, /the pod's container has args \["--audit-only","--pod=web-7c9f8b6d4-"\]/);
  });

  for (const [what, value] of [
    ['a flag of its own', '--config=/evil'],
    ["another pod's name", 'web-7c9f8b6d4-zzzzz'],
    ['more text after the name', 'web-7c9f8b6d4- --audit-only'],
  ]) {
    it(`refuses a sidecar that holds ${what} where the template reads the pod's name`, async () => {
      const pod = optedInPod({ spec: { containers: [{ name: 'web', image: 'nginx:1.27' }, holding(['--enforce', `--pod=${value}`])], volumes: [POLICY] } });
      const verdict = await admitted(pod, '/mutate', '/validate');
      assert.equal(verdict.allowed, false);
      assert.match(verdict.status.message, /the pod's container has args/);
    });
  }

  it("still refuses an impostor under the sidecar's name that runs another command", async () => {
    const pod = optedInPod({
      spec: {
        containers: [
          { name: 'web', image: 'nginx:1.27' },
          { ...holding(['--enforce', '--pod=web-7c9f8b6d4-']), command: ['sleep', 'infinity'] },
        ],
        volumes: [POLICY],
      },
    });
    const verdict = await admitted(pod, '/mutate', '/validate');
    assert.equal(verdict.allowed, false);
    assert.match(verdict.status.message, /the pod's container has command \["sleep","infinity"\]/);
  });
});

/**
 * The apiserver writes every quantity in canonical form before the validating webhooks see it
 * (`1024Mi` comes back `1Gi`): a required template that writes one otherwise must not make the
 * pods it was injected into look tampered with.
 */
describe('a required template that writes quantities in another form than the apiserver', () => {
  let api: FakeApiServer;
  let server: TestServer;
  const SIZED = { ...AGENT, env: [...AGENT.env, { name: 'MEM', valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1024Ki' } } }] };
  const SCRATCH = { name: 'agent-scratch', emptyDir: { sizeLimit: '1024Mi' } };

  const review = async (path: string, pod: object): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(podReview(pod, { namespace: 'team-a' })), { ca: server.certs.ca.certPem });
    return res.json().response;
  };
  /** The pod /mutate injected, with its quantities as the apiserver writes them (`canonical`). */
  const stored = async (canonical: { sizeLimit: string; divisor: string }): Promise<any> => {
    const pod = optedInPod();
    const mutated = await review('/mutate', pod);
    assert.equal(mutated.allowed, true, mutated.status?.message);
    const out = applyPatch(structuredClone(pod), decodePatch(mutated)).newDocument as any;
    out.spec.volumes.find((v: any) => v.name === 'agent-scratch').emptyDir.sizeLimit = canonical.sizeLimit;
    out.spec.containers.find((c: any) => c.name === 'agent').env.find((e: any) => e.name === 'MEM').valueFrom.resourceFieldRef.divisor = canonical.divisor;
    return out;
  };

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct(HOME, 'agent', AGENT.image, { required: {}, containers: [SIZED], volumes: [POLICY, SCRATCH] }));
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  it('admits the injected pod with 1Gi for 1024Mi and 1Mi for 1024Ki', async () => {
    const verdict = await review('/validate', await stored({ sizeLimit: '1Gi', divisor: '1Mi' }));
    assert.equal(verdict.allowed, true, verdict.status?.message);
  });

  it("refuses a volume of another size under the template volume's name", async () => {
    const verdict = await review('/validate', await stored({ sizeLimit: '2Gi', divisor: '1Mi' }));
    assert.equal(verdict.allowed, false);
    assert.match(verdict.status.message, /volume "agent-scratch" as its template defines it/);
  });
});
