import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { createHandlers } from '../../src/admission/handlers.js';
import type { ReviewRecord } from '../../src/admission/record.js';
import { ErrorCodes, type ErrorStatus } from '../../src/errors.js';
import { createAdmissionApp } from '../../src/server/admission-app.js';
import { createAdmissionServer } from '../../src/server/admission-server.js';
import { encodeStatusAnswer, StatusReasons } from '../../src/server/status-answer.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { httpsRequest } from '../helpers/client.js';
import { decodeStatus, webhookCallError } from '../helpers/client-go.js';
import { exchange, openTls, rawPost } from '../helpers/raw.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { makeTestCerts } from '../helpers/tls.js';

const WEBHOOK = 'mutate.sidecar-injector.io';

describe('encodeStatusAnswer', () => {
  it('gives every status of the error table its Kubernetes reason, in a body client-go decodes as a Failure', () => {
    const statuses = new Set(Object.values(ErrorCodes).map((e) => e.status));
    for (const status of statuses) {
      const body = decodeStatus(encodeStatusAnswer({ status, code: 'REVIEW_INVALID', message: 'what went wrong' }));
      assert.deepEqual(
        [body.kind, body.apiVersion, body.status, body.message, body.reason, body.code, body.details?.causes],
        ['Status', 'v1', 'Failure', 'what went wrong', StatusReasons[status], status, [{ reason: 'REVIEW_INVALID', message: 'what went wrong' }]],
      );
    }
  });

  it('says when to retry a 429 in the details, as the Retry-After header does', () => {
    const body = decodeStatus(encodeStatusAnswer({ status: 429, code: 'OVERLOADED', message: 'busy', retryAfterSeconds: 1 }));
    assert.equal(body.details?.retryAfterSeconds, 1);
  });
});

describe('what the apiserver makes of an answer (the test helper)', () => {
  it('reads our message from a Status, and only the generic one from the bodies answered before', () => {
    const ours = webhookCallError(WEBHOOK, {
      status: 400,
      contentType: 'application/json',
      text: encodeStatusAnswer({ status: 400, code: 'BODY_MALFORMED', message: 'request body is not valid JSON: x' }),
    });
    assert.equal(ours.userMessage, `Internal error occurred: failed calling webhook "${WEBHOOK}": failed to call webhook: request body is not valid JSON: x`);
    const old = webhookCallError(WEBHOOK, {
      status: 400,
      contentType: 'application/json',
      text: '{"error":"BODY_MALFORMED","message":"request body is not valid JSON: x","status":400}',
    });
    assert.equal(old.status, undefined);
    assert.equal(old.clientError, 'the server rejected our request for an unknown reason');
    const fault = webhookCallError(WEBHOOK, {
      status: 500,
      contentType: 'application/json',
      text: '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":false,"status":{"code":500,"message":"internal error"}}}',
    });
    assert.equal(fault.clientError, 'an error on the server ("unknown") has prevented the request from succeeding');
  });

  it('refuses a Status whose fields have the wrong JSON type, as Go unmarshalling does', () => {
    assert.throws(() => decodeStatus('{"kind":"Status","apiVersion":"v1","status":400,"message":"m"}'), /status: cannot unmarshal/);
    assert.throws(() => decodeStatus('{"kind":"Status","apiVersion":"v1","status":"Failure","code":"400"}'), /code: cannot unmarshal/);
    assert.throws(
      () => decodeStatus('{"kind":"Status","apiVersion":"v1","status":"Failure","details":{"causes":[{"reason":1}]}}'),
      /details\.causes\[0\]\.reason/,
    );
    assert.throws(() => decodeStatus('{"status":"Failure","message":"m"}'), /Kind' is missing/);
    assert.equal(decodeStatus('{"kind":"Status","status":"Failure","message":"m"}').message, 'm'); // apiVersion defaults to v1
  });
});

describe('error answers over TLS, read as the apiserver reads them', () => {
  let server: Server;
  let url: string;
  let ca: string;
  const records: ReviewRecord[] = [];

  before(async () => {
    const certs = await makeTestCerts();
    ca = certs.ca.certPem;
    const set = await loadTemplateSet('templates');
    const handlers = createHandlers({ templates: () => set });
    const byPath = new Map(handlers.byPath).set('/fault', () => {
      throw new Error('template store unavailable');
    });
    const app = createAdmissionApp({
      handlers: { byPath, generation: handlers.generation },
      observers: [(record) => records.push(record)],
      bodyTimeout: 1,
      bodyLimits: { objectKeys: 64, keys: 20480, nodes: 2000 },
    });
    server = createAdmissionServer(app, certs.serving);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const review = (pod: object, uid = randomUUID()): string => JSON.stringify(podReview(pod, { uid }));
  const manyKeys = (n: number): Record<string, string> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
  const cases: {
    name: string;
    path?: string;
    method?: string;
    body?: string | Buffer;
    type?: string | null;
    status: ErrorStatus;
    code: string;
    message: RegExp;
  }[] = [
    {
      name: 'a wrong Content-Type',
      type: 'text/plain',
      body: review(optedInPod()),
      status: 415,
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: /Content-Type must be application\/json, got "text\/plain"/,
    },
    { name: 'an empty body', body: '', status: 400, code: 'BODY_EMPTY', message: /request body is empty/ },
    { name: 'malformed JSON', body: '{"kind":', status: 400, code: 'BODY_MALFORMED', message: /request body is not valid JSON/ },
    {
      name: 'JSON that is not an AdmissionReview',
      body: '{"kind":"Pod"}',
      status: 400,
      code: 'REVIEW_INVALID',
      message: /not a valid AdmissionReview: apiVersion must be/,
    },
    {
      name: 'a map over --max-object-keys',
      body: review(optedInPod({ annotations: manyKeys(65) })),
      status: 400,
      code: 'REVIEW_INVALID',
      message: /more than 64 keys \(--max-object-keys\)/,
    },
    {
      name: 'a body over --max-json-nodes',
      body: review(optedInPod()).replace('"containers":[', `"containers":[${'[],'.repeat(1000)}`),
      status: 400,
      code: 'REVIEW_INVALID',
      message: /--max-json-nodes/,
    },
    { name: 'JSON nested 100 levels', body: '['.repeat(100) + ']'.repeat(100), status: 400, code: 'REVIEW_INVALID', message: /nested more than 64 levels/ },
    {
      name: 'a body over 7 MiB',
      body: Buffer.alloc(7 * 1024 * 1024 + 1, 0x20),
      status: 413,
      code: 'BODY_TOO_LARGE',
      message: /exceeds the limit of 7340032 bytes/,
    },
    { name: 'an unknown path', path: '/inject', body: review(optedInPod()), status: 404, code: 'NOT_FOUND', message: /no such path \/inject/ },
    { name: 'GET on /mutate', method: 'GET', status: 405, code: 'METHOD_NOT_ALLOWED', message: /method GET is not allowed on \/mutate; use POST/ },
    {
      name: 'a fault once the review is decoded',
      path: '/fault',
      body: review(optedInPod()),
      status: 500,
      code: 'INTERNAL',
      message: /internal error while handling the review: template store unavailable/,
    },
  ];
  for (const c of cases) {
    it(`answers ${c.name} with HTTP ${c.status} and a Status whose message the user reads`, async () => {
      const res = await httpsRequest(`${url}${c.path ?? '/mutate'}`, c.body, {
        ca,
        method: c.method ?? 'POST',
        contentType: c.type === undefined ? 'application/json' : c.type,
      });
      assertStatusAnswer({ status: res.status, contentType: res.headers['content-type'] as string | undefined, text: res.text }, c);
    });
  }

  it('answers a body not complete within --body-timeout with HTTP 408 and a Status', async () => {
    const body = review(optedInPod());
    const r = await exchange(await openTls((server.address() as AddressInfo).port, ca), [rawPost('/mutate', body).slice(0, -(body.length - 1))], 5000);
    const at = r.text.indexOf('\r\n\r\n');
    assertStatusAnswer(
      { status: r.status ?? 0, contentType: /content-type: ([^\r]*)/i.exec(r.text)?.[1], text: r.text.slice(at + 4) },
      { status: 408, code: 'BODY_TIMEOUT', message: /not received within 1 s/ },
    );
  });

  it('answers a review over --max-inflight with HTTP 429, Retry-After and a Status that says the same', async () => {
    const certs = await makeTestCerts();
    const set = await loadTemplateSet('templates');
    const full = createAdmissionServer(createAdmissionApp({ handlers: createHandlers({ templates: () => set }), maxInflight: 0 }), certs.serving);
    await new Promise<void>((r) => full.listen(0, '127.0.0.1', r));
    try {
      const res = await httpsRequest(`https://127.0.0.1:${(full.address() as AddressInfo).port}/mutate`, review(optedInPod()), { ca: certs.ca.certPem });
      assert.equal(res.headers['retry-after'], '1');
      const status = assertStatusAnswer(
        { status: res.status, contentType: res.headers['content-type'] as string, text: res.text },
        { status: 429, code: 'OVERLOADED', message: /too many reviews in progress/ },
      );
      assert.equal(status.details?.retryAfterSeconds, 1);
    } finally {
      full.closeAllConnections();
      await new Promise((r) => full.close(r));
    }
  });

  describe('the record of a refused body', () => {
    const refusedRecord = async (body: string): Promise<ReviewRecord> => {
      const before = records.length;
      const res = await httpsRequest(`${url}/mutate`, body, { ca });
      assert.equal(res.status, 400, res.text);
      assert.equal(records.length, before + 1);
      return records[before]!;
    };

    it('carries the uid the apiserver writes first, though the body was refused', async () => {
      const uid = randomUUID();
      const record = await refusedRecord(review(optedInPod({ annotations: manyKeys(65) }), uid));
      assert.deepEqual([record.code, record.uid], ['REVIEW_INVALID', uid]);
      const v1beta1 = JSON.stringify(podReview(optedInPod({ annotations: manyKeys(65) }), { uid, apiVersion: 'admission.k8s.io/v1beta1' }));
      assert.equal((await refusedRecord(v1beta1)).uid, uid);
    });

    it('carries the uid of a review that faulted once decoded, though its answer is a Status', async () => {
      const uid = randomUUID();
      const before = records.length;
      assert.equal((await httpsRequest(`${url}/fault`, review(optedInPod(), uid), { ca })).status, 500);
      assert.deepEqual([records[before]?.code, records[before]?.uid], ['INTERNAL', uid]);
    });

    it('carries no uid when the body does not begin as the apiserver writes it, or its uid is not clean', async () => {
      const tail = `","kind":{"group":"","version":"v1","kind":"Pod"},"object":${JSON.stringify(optedInPod({ annotations: manyKeys(65) }))}}}`;
      const head = '{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"';
      for (const body of [
        `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"${randomUUID()}${tail}`, // another field order
        ` ${head}${randomUUID()}${tail}`, // white space first
        `${head}${randomUUID()}\\"injected${tail}`, // an escape inside
        `${head}\\u0041${tail}`, // only an escape
        `${head}a b${tail}`, // a space
        `${head}${'a'.repeat(65)}${tail}`, // longer than any uid
        `${head}${'é'.repeat(8)}${tail}`, // not ASCII
        `${head}${tail}`, // empty
        `${head}abc`, // cut before its closing quote
      ]) {
        const record = await refusedRecord(body);
        assert.equal(record.uid, '', body.slice(0, 120));
      }
    });
  });
});

/** Asserts the answer is a Status the apiserver decodes, with our code and message; returns it. */
function assertStatusAnswer(
  answer: { status: number; contentType: string | undefined; text: string },
  want: { status: ErrorStatus; code: string; message: RegExp },
) {
  assert.equal(answer.status, want.status, answer.text.slice(0, 200));
  assert.equal(answer.contentType, 'application/json');
  const seen = webhookCallError(WEBHOOK, answer);
  assert.equal(seen.notStatus, undefined, answer.text.slice(0, 200));
  const status = seen.status!;
  assert.deepEqual(
    [status.status, status.code, status.reason, status.details?.causes?.[0]?.reason],
    ['Failure', want.status, StatusReasons[want.status], want.code],
  );
  assert.match(status.message ?? '', want.message);
  assert.equal(seen.userMessage, `Internal error occurred: failed calling webhook "${WEBHOOK}": failed to call webhook: ${status.message}`);
  return status;
}
