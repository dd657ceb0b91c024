import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { admit } from '../helpers/apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Hostile values anywhere in a review are refused (4xx, or an AdmissionReview that says
 * allowed: false with code 400), never a 500: valid reviews are mutated at a random path into
 * values of the wrong type, deep nesting and objects whose keys shadow Object.prototype.
 */

let server: TestServer;
let ca: string;
let reinvoked: object;

before(async () => {
  server = await startTestServer();
  ca = server.certs.ca.certPem;
  // A pod that already holds the sidecars: its containers, env, mounts and volumes are compared
  // with the templates' (isSubset), so hostile values there reach the comparison.
  reinvoked = (await admit(server.url, ca, optedInPod({ spec: appSpec() }))).pod;
});
after(() => server.close());

function appSpec(): object {
  return {
    volumes: [{ name: 'data', emptyDir: {} }],
    imagePullSecrets: [{ name: 'registry' }],
    containers: [
      {
        name: 'web',
        image: 'nginx:1.27',
        env: [
          { name: 'LOG_DIR', value: '/var/log/app' },
          { name: 'MODE', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        ],
        volumeMounts: [{ name: 'data', mountPath: '/data' }],
        ports: [{ containerPort: 8080, name: 'http' }],
        resources: { requests: { cpu: '100m' } },
      },
    ],
  };
}

const DEEP = '"__DEEP__"';

/** What goes in place of a value; `deep` is spliced into the text, since JSON.stringify recurses. */
const hostile = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    0,
    -1,
    1e308,
    true,
    false,
    '',
    [],
    {},
    [[[['x']]]],
    { toString: 'x' },
    { toString: {}, valueOf: 1 },
    { constructor: { prototype: { polluted: 'yes' } } },
    ['a', { b: 'c' }],
    'x'.repeat(70_000),
  ),
  fc.record({ deep: fc.constantFrom(20, 65, 10_000, 100_000), kind: fc.constantFrom('[', '{"a":') }),
);

/** Every path to a value in `doc` (objects and lists included), as lists of keys. */
function pathsOf(doc: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  if (prefix.length > 0) out.push(prefix);
  if (Array.isArray(doc)) doc.forEach((v, i) => pathsOf(v, [...prefix, i], out));
  else if (typeof doc === 'object' && doc !== null) for (const [k, v] of Object.entries(doc)) pathsOf(v, [...prefix, k], out);
  return out;
}

function bodyWith(review: any, path: readonly (string | number)[], value: unknown): string {
  const copy = structuredClone(review);
  let at = copy;
  for (const key of path.slice(0, -1)) at = at[key];
  const isDeep = typeof value === 'object' && value !== null && 'deep' in value;
  Object.defineProperty(at, path[path.length - 1]!, { value: isDeep ? '__DEEP__' : value, enumerable: true, writable: true, configurable: true });
  const text = JSON.stringify(copy);
  if (!isDeep) return text;
  const { deep, kind } = value as { deep: number; kind: string };
  const close = kind === '[' ? ']' : '}';
  return text.replace(DEEP, kind.repeat(deep) + (kind === '[' ? '' : '1') + close.repeat(deep));
}

describe('hostile values in a review', () => {
  it('are refused with 400, never 500, and the next valid review succeeds (property, over TLS)', async () => {
    const reviews = [podReview(optedInPod({ spec: appSpec() })), podReview(reinvoked)];
    const paths = reviews.map((r) => pathsOf(r));
    await fc.assert(
      fc.asyncProperty(fc.nat(1), fc.nat(), hostile, fc.constantFrom('/mutate', '/validate'), async (which, pick, value, endpoint) => {
        const review = reviews[which]!;
        const path = paths[which]![pick % paths[which]!.length]!;
        const started = Date.now();
        const res = await httpsRequest(`${server.url}${endpoint}`, bodyWith(review, path, value), { ca });
        assert.ok(Date.now() - started < 5000, 'answered well within the apiserver timeout');
        assert.ok(res.status === 200 || (res.status >= 400 && res.status < 500), `${path.join('.')}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
        const body = res.json();
        if (res.status === 200) {
          // A hostile string in request.uid itself is echoed: the answer must carry the uid it was asked with.
          const sentUid = path.length === 2 && path[1] === 'uid' ? value : review.request.uid;
          assert.equal(body.response.uid, sentUid);
          // 403 is /validate's answer to a pod that lacks its sidecars.
          if (!body.response.allowed) assert.ok([400, 403].includes(body.response.status.code), `${path.join('.')}: ${JSON.stringify(body.response.status)}`);
        }
        assert.equal(({} as any).polluted, undefined);
        const after = await admit(server.url, ca, optedInPod());
        assert.equal(after.response.allowed, true);
        assert.ok(after.ops.length > 0);
      }),
      { numRuns: 150 },
    );
  });

  for (const [what, path, value, message] of [
    ['10 000 levels of nesting in object.kind', ['request', 'object', 'kind'], { deep: 10_000, kind: '{"a":' }, /nested more than 64 levels/],
    [
      'an env value that is an object with a toString key',
      ['request', 'object', 'spec', 'containers', 0, 'env', 0, 'value'],
      { toString: 'x' },
      /env\[0\]\.value must be a string/,
    ],
    [
      'a label value that is an object',
      ['request', 'object', 'metadata', 'labels', 'app'],
      { a: { b: 'c' } },
      /labels must map strings to strings; "app" maps to an object/,
    ],
    ['a kind that is a long string', ['request', 'object', 'kind'], 'Pod'.repeat(30_000), /request.object has kind "(Pod){21}P…", not Pod/],
  ] as const) {
    it(`refuses ${what} with a short message`, async () => {
      const review = podReview(optedInPod({ spec: appSpec() }));
      const res = await httpsRequest(`${server.url}/mutate`, bodyWith(review, path, value), { ca });
      assert.ok(res.status < 500, res.text.slice(0, 200));
      const body = res.json();
      const text = res.status === 200 ? body.response.status.message : body.message;
      if (res.status === 200) assert.equal(body.response.allowed, false);
      assert.match(text, message);
      assert.ok(text.length < 300);
      const after = await admit(server.url, ca, optedInPod());
      assert.equal(after.response.allowed, true);
    });
  }
});
