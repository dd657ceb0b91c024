import assert from 'node:assert/strict';
import { get } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { httpsRequest } from '../helpers/client.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { podProblems } from '../helpers/pod.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Endpoints } from '../../src/admission/endpoints.js';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.close());

/** Sends a pod CREATE to one path as the apiserver would; for a mutating path, applies the patch. */
async function call(path: string, pod: any): Promise<{ response: any; pod: any }> {
  const review = podReview(pod, { namespace: 'shop' });
  const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(review), { ca: server.certs.ca.certPem });
  assert.equal(res.status, 200, res.text);
  const response = res.json().response;
  assert.equal(response.uid, review.request.uid);
  const patched = applyPatchV4(pod, decodePatch(response));
  if (response.allowed) assert.deepEqual(podProblems(patched), []);
  return { response, pod: patched };
}

function podLabelled(value: string | undefined): any {
  const pod = optedInPod();
  if (value === undefined) delete pod.metadata.labels['sidecar-injector.io/inject'];
  else pod.metadata.labels['sidecar-injector.io/inject'] = value;
  return pod;
}

const names = (pod: any) => pod.spec.containers.map((c: any) => c.name);

describe('namespace opt-in endpoints (/mutate/namespace, /validate/namespace)', () => {
  it('injects a pod without the inject label, and the validator admits it', async () => {
    const { response, pod } = await call('/mutate/namespace', podLabelled(undefined));
    assert.equal(response.allowed, true);
    assert.deepEqual(names(pod), ['web', 'log-shipper']);
    assert.equal((await call('/validate/namespace', pod)).response.allowed, true);
  });

  it('rejects at /validate/namespace a pod without the label that lacks its sidecars', async () => {
    const { response } = await call('/validate/namespace', podLabelled(undefined));
    assert.equal(response.allowed, false);
    assert.equal(response.status.code, 403);
  });

  it('treats "true" as opted in and any other value as opted out', async () => {
    assert.deepEqual(names((await call('/mutate/namespace', podLabelled('true'))).pod), ['web', 'log-shipper']);
    for (const value of ['false', 'no', '']) {
      const mutated = await call('/mutate/namespace', podLabelled(value));
      assert.equal(mutated.response.allowed, true);
      assert.equal(mutated.response.patch, undefined, value);
      assert.equal((await call('/validate/namespace', podLabelled(value))).response.allowed, true, value);
    }
  });

  it('keeps /mutate and /validate to pods labelled "true"', async () => {
    assert.equal((await call('/mutate', podLabelled(undefined))).response.patch, undefined);
    assert.equal((await call('/validate', podLabelled(undefined))).response.allowed, true);
    assert.deepEqual(names((await call('/mutate', podLabelled('true'))).pod), ['web', 'log-shipper']);
  });

  it('counts the namespace paths in the metrics as mutate and validate reviews (no series per path)', async () => {
    await call('/mutate/namespace', podLabelled(undefined));
    const text = await new Promise<string>((resolve, reject) => {
      get(`${server.healthUrl}/metrics`, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve(body));
      }).on('error', reject);
    });
    assert.match(text, /sidecar_injector_reviews_total\{endpoint="mutate",operation="CREATE",decision="injected",reason="injected"\}/);
    assert.doesNotMatch(text, /endpoint="\/mutate\/namespace"|endpoint="other"/);
  });

  it('names every path of the endpoint table when a path is unknown', async () => {
    const res = await httpsRequest(`${server.url}/mutate/other`, JSON.stringify(podReview(optedInPod())), { ca: server.certs.ca.certPem });
    assert.equal(res.status, 404);
    const served = (res.json().message as string).replace(/^.*the webhook serves POST /, '').split(/, | and /);
    assert.deepEqual(served.sort(), Endpoints.map((e) => e.path).sort());
  });
});
