import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fastJsonPatch from 'fast-json-patch';
import { HOME, sct, eventually } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startClusterTestServer, type TestServer } from '../helpers/server.js';
import { SETS_KEPT } from '../../src/templates/history.js';

const { applyPatch } = fastJsonPatch;

/**
 * The history of template versions is kept per namespace: a pod a replica injected from a quiet
 * team's previous version (a replica behind, or this one before the change) is still admitted by
 * /validate for the window, however often another team changes its templates meanwhile. Through
 * the API stand-in and the real server (HTTPS).
 */
describe("one team's churn never ages out another namespace's template history", () => {
  let api: FakeApiServer;
  let server: TestServer;

  const answer = async (path: string, pod: object, namespace: string): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(podReview(pod, { namespace })), { ca: server.certs.ca.certPem });
    assert.equal(res.status, 200);
    return res.json().response;
  };
  const injected = async (namespace: string): Promise<any> => {
    const response = await answer('/mutate', optedInPod(), namespace);
    assert.equal(response.allowed, true, response.status?.message);
    return applyPatch(optedInPod(), decodePatch(response)).newDocument;
  };
  const image = (pod: any, name: string): string | undefined => pod.spec.containers.find((c: any) => c.name === name)?.image;

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct(HOME, 'proxy', 'registry.example.com/proxy:1', { default: true }));
    api.applyTemplate(sct('quiet', 'agent', 'registry.example.com/agent:1', { default: true }));
    api.applyTemplate(sct('busy', 'logger', 'registry.example.com/logger:0', { default: true }));
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  it(`admits a pod of the quiet namespace's previous version after ${SETS_KEPT * 2} changes in the busy one`, async () => {
    const old = await injected('quiet');
    assert.equal(image(old, 'agent'), 'registry.example.com/agent:1');
    // The quiet team moves its agent to another registry: a pod of the old version runs another repository.
    api.applyTemplate(sct('quiet', 'agent', 'mirror.example.com/agent:2', { default: true }));
    await eventually(async () => image(await injected('quiet'), 'agent') === 'mirror.example.com/agent:2', "the quiet team's new version served");
    const before = await answer('/validate', old, 'quiet');
    assert.equal(before.allowed, true, before.status?.message);
    for (let i = 1; i <= SETS_KEPT * 2; i++) {
      api.applyTemplate(sct('busy', 'logger', `registry.example.com/logger:${i}`, { default: true }));
      await eventually(async () => image(await injected('busy'), 'logger') === `registry.example.com/logger:${i}`, `the busy team's version ${i} served`);
    }
    const after = await answer('/validate', old, 'quiet');
    assert.equal(after.allowed, true, `a pod of the quiet namespace's previous version: ${after.status?.message}`);
    assert.equal(after.auditAnnotations?.reason, 'earlier-templates');
  });
});
