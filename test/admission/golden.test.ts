import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { httpsRequest } from '../helpers/client.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { podProblems } from '../helpers/pod.js';
import { decodePatch, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Golden AdmissionResponses: each folder of test/fixtures/admission holds request.yaml (the endpoint
 * and the pod) and response.json, the answer of the real server serving the fixture templates in
 * test/fixtures/admission/templates (never the shipped ones, so a change there does not move these).
 * The uid is left out (it only echoes the request's), and the patch is shown decoded. REFRESH_GOLDEN=true
 * rewrites them after an intended change.
 */
const ROOT = 'test/fixtures/admission';
const refresh = process.env['REFRESH_GOLDEN'] === 'true';
const NAMESPACE = 'team-a';

interface Case {
  readonly path: '/mutate' | '/validate';
  readonly pod: Record<string, unknown>;
}

/** The response as a reviewer reads it: without the uid, with the patch decoded. */
function readable(response: any): object {
  const { uid: _uid, patch, ...rest } = response;
  return patch === undefined ? rest : { ...rest, patch: decodePatch(response) };
}

describe('AdmissionResponses of the handlers (golden files)', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer(['--templates-dir', join(ROOT, 'templates'), '--templates-poll-seconds', '0']);
  });
  after(() => server.close());

  const send = async (path: string, pod: object): Promise<any> => {
    const review = podReview(pod, { namespace: NAMESPACE });
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(review), { ca: server.certs.ca.certPem });
    assert.equal(res.status, 200, res.text);
    const { response } = res.json();
    assert.equal(response.uid, review.request.uid, 'response.uid echoes request.uid');
    return response;
  };

  for (const name of readdirSync(ROOT).filter((n) => n !== 'templates').sort()) {
    it(name, async () => {
      const dir = join(ROOT, name);
      const c = parse(readFileSync(join(dir, 'request.yaml'), 'utf8')) as Case;
      const pod = { apiVersion: 'v1', kind: 'Pod', ...c.pod };
      const response = await send(c.path, pod);

      const file = join(dir, 'response.json');
      const actual = `${JSON.stringify(readable(response), null, 2)}\n`;
      if (refresh) writeFileSync(file, actual);
      else {
        assert.ok(existsSync(file), `${file} is missing; run with REFRESH_GOLDEN=true to create it`);
        assert.equal(actual, readFileSync(file, 'utf8'), `${file} differs; run with REFRESH_GOLDEN=true if the change is intended`);
      }

      // What the apiserver does with the answer: a patch applies under json-patch v4 rules, the
      // patched pod passes pod validation, and the validating webhook then admits it.
      if (c.path === '/validate') assert.equal(response.patch, undefined, 'a validating webhook never patches');
      if (response.patch !== undefined) {
        assert.equal(response.patchType, 'JSONPatch');
        const patched = applyPatchV4(pod, decodePatch(response));
        assert.deepEqual(podProblems(patched), [], 'the patched pod must be valid');
        const validated = await send('/validate', patched);
        assert.equal(validated.allowed, true, validated.status?.message);
      }
      if (!response.allowed) assert.equal(response.patch, undefined, 'a denial carries no patch');
    });
  }
});
