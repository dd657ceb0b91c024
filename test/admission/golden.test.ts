import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
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
 * and the pod), the answer of the real server serving the fixture templates in
 * test/fixtures/admission/templates (never the shipped ones, so a change there does not move these)
 * as answer.json, and response.json, the same answer for a reader.
 *
 * answer.json is the HTTP body byte for byte (then a newline, for editors): the review is sent with a
 * uid of its own (uidOf the case's name), so every byte of the answer is the product's, and a change
 * of the patch's text (its op order, its encoding, the JSON of a value), of the order of the
 * response's fields or of its base64 shows here even when the decoded patch is equal.
 * response.json leaves the uid out and shows the patch decoded. REFRESH_GOLDEN=true rewrites both
 * after an intended change.
 */
const ROOT = 'test/fixtures/admission';
const refresh = process.env['REFRESH_GOLDEN'] === 'true';
const NAMESPACE = 'team-a';

interface Case {
  readonly path: '/mutate' | '/validate';
  readonly pod: Record<string, unknown>;
}

/** A fixed uid for a case, shaped as the apiserver's (a UUID), so that its answer's bytes are fixed too. */
function uidOf(name: string): string {
  const hex = createHash('sha256').update(name).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

function golden(file: string, actual: string): void {
  if (refresh) return void writeFileSync(file, actual);
  assert.ok(existsSync(file), `${file} is missing; run with REFRESH_GOLDEN=true to create it`);
  assert.equal(actual, readFileSync(file, 'utf8'), `${file} differs; run with REFRESH_GOLDEN=true if the change is intended`);
}

/** The JSON patch's text (its bytes as UTF-8) in an answer's body; undefined when it has none. */
function patchTextOf(body: string): string | undefined {
  const patch: string | undefined = JSON.parse(body).response?.patch;
  return patch === undefined ? undefined : Buffer.from(patch, 'base64').toString('utf8');
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

  const exchange = async (path: string, pod: object, uid?: string): Promise<{ response: any; text: string }> => {
    const review = podReview(pod, { namespace: NAMESPACE, ...(uid !== undefined && { uid }) });
    const res = await httpsRequest(`${server.url}${path}`, JSON.stringify(review), { ca: server.certs.ca.certPem });
    assert.equal(res.status, 200, res.text);
    const { response } = res.json();
    assert.equal(response.uid, review.request.uid, 'response.uid echoes request.uid');
    return { response, text: res.text };
  };
  const send = async (path: string, pod: object): Promise<any> => (await exchange(path, pod)).response;

  for (const name of readdirSync(ROOT)
    .filter((n) => n !== 'templates')
    .sort()) {
    it(name, async () => {
      const dir = join(ROOT, name);
      const c = parse(readFileSync(join(dir, 'request.yaml'), 'utf8')) as Case;
      const pod = { apiVersion: 'v1', kind: 'Pod', ...c.pod };
      const { response, text } = await exchange(c.path, pod, uidOf(name));

      golden(join(dir, 'response.json'), `${JSON.stringify(readable(response), null, 2)}\n`);
      const answerFile = join(dir, 'answer.json');
      // The patch's own text first, so that a change in it reads as JSON rather than as base64.
      if (!refresh && existsSync(answerFile))
        assert.equal(patchTextOf(text), patchTextOf(readFileSync(answerFile, 'utf8')), `${answerFile}: the patch's text differs`);
      golden(answerFile, `${text}\n`);

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
