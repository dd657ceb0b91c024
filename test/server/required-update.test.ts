import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fastJsonPatch from 'fast-json-patch';
import { PodsDir, readYaml11 } from '../corpus/corpus.js';
import { HOME, sct } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startClusterTestServer, type TestServer } from '../helpers/server.js';

const { applyPatch } = fastJsonPatch;

const AGENT_IMAGE = 'registry.example.com/agent:1';
const WHY = 'template "agent" is required in namespace team-b (its namespaceSelector takes it) by the platform\'s spec.required';

/** The AdmissionReview the apiserver sends for a pod UPDATE: the stored pod as oldObject, the pod's name, UpdateOptions. */
function updateReview(old: any, pod: any, namespace: string, subResource?: string): any {
  const review = podReview(pod, { namespace, operation: 'UPDATE' });
  const { uid, kind, resource } = review.request;
  review.request = {
    uid,
    kind,
    resource,
    ...(subResource !== undefined && { subResource }),
    requestKind: kind,
    requestResource: resource,
    ...(subResource !== undefined && { requestSubResource: subResource }),
    name: pod.metadata.name,
    namespace,
    operation: 'UPDATE',
    userInfo: { username: 'alice', groups: ['system:authenticated'] },
    object: pod,
    oldObject: old,
    dryRun: false,
    options: { apiVersion: 'meta.k8s.io/v1', kind: 'UpdateOptions' },
  };
  return review;
}

/**
 * A pod UPDATE may change a container's image (`kubectl set image pod/x agent=evil`), and the
 * required validating webhook (manifests/components/required, the chart's `required` values) now
 * sends pod UPDATEs too: /validate/required refuses an update that swaps or drops a sidecar a
 * required template injects, and allows every other update. Through the real server (HTTPS) with
 * AdmissionReviews as the apiserver sends them, oldObject included (kubeadmit runs CREATE only).
 */
describe('required webhooks: a pod UPDATE cannot swap a required sidecar', () => {
  let api: FakeApiServer;
  let server: TestServer;

  const answer = async (path: string, review: object): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(review), { ca: server.certs.ca.certPem });
    assert.equal(res.status, 200, `${path} answers`);
    return res.json().response;
  };
  /** The pod as stored: created through /mutate (it opted in), named (the apiserver names it before storing). */
  const stored = async (pod: any, namespace: string): Promise<any> => {
    const response = await answer('/mutate', podReview(pod, { namespace }));
    assert.equal(response.allowed, true, response.status?.message);
    const injected = applyPatch(structuredClone(pod), decodePatch(response)).newDocument;
    injected.metadata.name ??= `${injected.metadata.generateName ?? 'pod-'}x7k2p`;
    return injected;
  };
  /** `pod` with `change` made to a copy. */
  const edited = (pod: any, change: (p: any) => void): any => {
    const copy = structuredClone(pod);
    change(copy);
    return copy;
  };
  const update = (old: any, pod: any, namespace = 'team-b', subResource?: string): Promise<any> =>
    answer('/validate/required', updateReview(old, pod, namespace, subResource));
  const agent = (pod: any): any => pod.spec.containers.find((c: any) => c.name === 'agent');

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(
      sct(HOME, 'agent', AGENT_IMAGE, {
        required: { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['legacy'] }] } },
      }),
    );
    api.applyTemplate(sct(HOME, 'shield', 'registry.example.com/shield:3', { nativeSidecar: true, required: {} }));
    api.applyTemplate(sct(HOME, 'mesh', 'registry.example.com/mesh:1', { default: true }));
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  it('refuses kubectl set image on the required sidecar, naming the template, why and the image', async () => {
    const pod = await stored(optedInPod(), 'team-b');
    assert.equal(agent(pod).image, AGENT_IMAGE);
    const denied = await update(
      pod,
      edited(pod, (p) => (agent(p).image = 'evil.example.com/agent:1')),
    );
    assert.equal(denied.allowed, false);
    assert.equal(denied.status.code, 403);
    assert.equal(denied.status.reason, 'Forbidden');
    assert.equal(
      denied.status.message,
      `${WHY}, and this update sets the image of its container "agent" to evil.example.com/agent:1 (the template injects ${AGENT_IMAGE}); leave its image as the template injects it (the platform changes it by changing the template, for new pods)`,
    );
    // Another tag of the same repository is another image too.
    assert.equal(
      (
        await update(
          pod,
          edited(pod, (p) => (agent(p).image = 'registry.example.com/agent:0-old')),
        )
      ).allowed,
      false,
    );
  });

  it('holds a required native sidecar (an init container) the same way', async () => {
    const pod = await stored(optedInPod(), 'team-b');
    const shield = (p: any): any => p.spec.initContainers.find((c: any) => c.name === 'shield');
    assert.equal(shield(pod).image, 'registry.example.com/shield:3');
    const denied = await update(
      pod,
      edited(pod, (p) => (shield(p).image = 'busybox')),
    );
    assert.equal(denied.allowed, false);
    assert.equal(
      denied.status.message,
      'template "shield" is required in every namespace by the platform\'s spec.required, and this update sets the image of its native sidecar "shield" to busybox (the template injects registry.example.com/shield:3); leave its image as the template injects it (the platform changes it by changing the template, for new pods)',
    );
  });

  it('refuses an update that drops the required sidecar', async () => {
    const pod = await stored(optedInPod(), 'team-b');
    const denied = await update(
      pod,
      edited(pod, (p) => (p.spec.containers = p.spec.containers.filter((c: any) => c.name !== 'agent'))),
    );
    assert.equal(denied.allowed, false);
    assert.match(denied.status.message, /this update removes its container "agent"/);
  });

  it('allows every update that leaves the required sidecar as injected', async () => {
    const pod = await stored(optedInPod(), 'team-b');
    const allowedUpdates: [string, any][] = [
      ['a label', edited(pod, (p) => (p.metadata.labels.tier = 'gold'))],
      ['an annotation', edited(pod, (p) => (p.metadata.annotations['team.example.com/owner'] = 'b'))],
      ["the injector's own status annotation", edited(pod, (p) => delete p.metadata.annotations['sidecar-injector.io/status'])],
      ["the application's image", edited(pod, (p) => (p.spec.containers[0].image = 'nginx:1.28'))],
      ['a sidecar that is not required', edited(pod, (p) => (p.spec.containers.find((c: any) => c.name === 'mesh').image = 'registry.example.com/mesh:2'))],
      ['the required sidecar set to the image it runs', edited(pod, (p) => (agent(p).image = AGENT_IMAGE))],
      ['nothing (an update with no change)', structuredClone(pod)],
    ];
    for (const [what, next] of allowedUpdates) {
      const response = await update(pod, next);
      assert.equal(response.allowed, true, `${what}: ${response.status?.message}`);
    }
    // A sidecar swapped before (by an update this webhook did not see) may be set back to the template's image.
    const tampered = edited(pod, (p) => (agent(p).image = 'evil.example.com/agent:1'));
    assert.equal((await update(tampered, pod)).allowed, true, "set back to the template's image");
  });

  it('allows updates of pods that never got the sidecar, of namespaces it is not required in, and of subresources', async () => {
    const bare = { ...optedInPod({ name: 'bare' }), spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] } };
    assert.equal(
      (
        await update(
          bare,
          edited(bare, (p) => (p.spec.containers[0].image = 'nginx:1.28')),
        )
      ).allowed,
      true,
      'never injected',
    );
    const legacy = await stored(optedInPod(), 'legacy');
    const swapped = edited(legacy, (p) => (p.spec.containers[0].image = 'nginx:1.28'));
    assert.equal((await update(legacy, swapped, 'legacy')).allowed, true, 'not required there');
    const pod = await stored(optedInPod(), 'team-b');
    const status = edited(pod, (p) => (agent(p).image = 'evil.example.com/agent:1'));
    assert.equal((await update(pod, status, 'team-b', 'status')).allowed, true, 'pods/status is not the pod');
  });

  it('holds for a real-world pod: the Bitnami PostgreSQL primary of the corpus', async () => {
    const [manifest] = readYaml11(join(PodsDir, 'helm-bitnami-postgresql.yaml'));
    const template = manifest!.spec.template ?? manifest!;
    const metadata = { ...template.metadata, generateName: 'postgresql-', labels: { ...template.metadata?.labels, 'sidecar-injector.io/inject': 'true' } };
    const pod = await stored({ apiVersion: 'v1', kind: 'Pod', metadata, spec: template.spec }, 'team-b');
    assert.equal(agent(pod).image, AGENT_IMAGE);
    const app = pod.spec.containers[0].name;
    assert.equal(
      (
        await update(
          pod,
          edited(pod, (p) => (p.spec.containers[0].image = 'docker.io/bitnami/postgresql:17')),
        )
      ).allowed,
      true,
      `${app}'s image`,
    );
    assert.equal(
      (
        await update(
          pod,
          edited(pod, (p) => (agent(p).image = 'docker.io/bitnami/postgresql:17')),
        )
      ).allowed,
      false,
      'the agent swapped',
    );
  });
});
