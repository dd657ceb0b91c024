import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  apiserverEnvelope,
  base64Patch,
  checkBody,
  decodeBody,
  describeValue,
  encodeAnswer,
  MAX_NESTING,
  ReviewVersion,
  type BodyLimits,
  type ResponseBody,
} from '../../src/admission/codec.js';
import { InjectorError } from '../../src/errors.js';

/**
 * Whether checkBody refuses a text under `limits`. A refusal must be REVIEW_INVALID with a message
 * matching `reason`, so a text refused for another limit than the one a test is about fails it.
 */
function refusedBy(limits: BodyLimits, reason: RegExp): (text: string) => boolean {
  return (text) => {
    try {
      checkBody(text, limits);
      return false;
    } catch (err) {
      assert.ok(err instanceof InjectorError, String(err));
      assert.equal(err.code, 'REVIEW_INVALID');
      assert.match(err.message, reason);
      return true;
    }
  };
}

/** Small limits, and any reason: the tests that use it expect no refusal at all. */
const refusedAtAll = refusedBy({ objectKeys: 3, keys: 1000, nodes: 10 }, /./);

describe('checkBody', () => {
  it('counts only the structure outside strings: brackets, colons and escaped quotes inside strings are text', () => {
    assert.equal(refusedAtAll(JSON.stringify({ a: '[[[[{{{{:::::', b: 'say \\"[[[[\\" :::', c: '\\\\' })), false);
    assert.equal(refusedAtAll(JSON.stringify({ a: '"[[[[[[[[[[[[[[' })), false);
  });

  it('counts the keys of each object apart, siblings and parents included', () => {
    const keys = { objectKeys: 3, keys: 1000, nodes: 1000 };
    assert.doesNotThrow(() => checkBody('{"a":{"x":1,"y":2,"z":3},"b":{"x":1,"y":2,"z":3},"c":3}', keys));
    assert.throws(() => checkBody('{"a":{"x":1,"y":2,"z":3},"b":1,"c":2,"d":3}', keys), /an object of more than 3 keys \(--max-object-keys\)/);
    assert.throws(() => checkBody('{"a":[{"x":1,"y":2,"z":3,"w":4}]}', keys), /more than 3 keys/);
  });

  it('counts every object, list, key and list item as a node, at any depth', () => {
    const refused = refusedBy({ objectKeys: 1000, keys: 1000, nodes: 10 }, /more than 10 JSON nodes \(objects, lists, keys and list items; --max-json-nodes\)/);
    // An object, two keys, a list with its four items, an object and its key: 10.
    assert.equal(refused('{"a":[1,2,3,4],"b":{"c":1}}'), false);
    assert.equal(refused('{"a":[1,2,3,4,5],"b":{"c":1}}'), true);
    // List items alone: a list of short strings (a container's args) or numbers holds no object.
    assert.equal(refused(`[${Array(9).fill('"x"').join(',')}]`), false);
    assert.equal(refused(`[${Array(10).fill('"x"').join(',')}]`), true);
    assert.equal(refused(`[${Array(10).fill(0).join(' , ')}]`), true);
    // Keys alone.
    assert.equal(refused(`{${Array.from({ length: 9 }, (_, i) => `"k${i}":0`).join(',')}}`), false);
    assert.equal(refused(`{${Array.from({ length: 10 }, (_, i) => `"k${i}":0`).join(',')}}`), true);
    // A list and its first item, three more items, four objects: 9; one more item and object: 11.
    assert.equal(refused(`[${Array(4).fill('{}').join(',')}]`), false);
    assert.equal(refused(`[${Array(5).fill('{}').join(',')}]`), true);
  });

  it('reads long runs of white space and digits without losing the structure after them', () => {
    const nodes = { objectKeys: 1000, keys: 1000, nodes: 10 };
    const pad = ' '.repeat(1000);
    assert.doesNotThrow(() => checkBody(`{${pad}"a"${pad}:${pad}${'1'.repeat(1000)}${pad},"b":"[[[[[[[[[[[[${pad}"}`, nodes));
    assert.throws(() => checkBody(`[${pad}${'7'.repeat(500)}${pad}${Array(10).fill(',1').join('')}]`, nodes), /more than 10 JSON nodes/);
    assert.throws(() => checkBody(`[${pad}1${pad},${'['.repeat(MAX_NESTING)}${']'.repeat(MAX_NESTING)}]`), /nested more than 64 levels/);
  });

  it(`refuses nesting past ${MAX_NESTING} levels, and allows it up to them`, () => {
    const nest = (n: number): string => '['.repeat(n) + ']'.repeat(n);
    assert.doesNotThrow(() => checkBody(nest(MAX_NESTING)));
    assert.throws(() => checkBody(nest(MAX_NESTING + 1)), /nested more than 64 levels/);
    assert.throws(() => checkBody(`{"a":"]]]]","b":${nest(MAX_NESTING + 1)}}`), /nested more than 64 levels/);
  });

  it('counts the keys of every object together against --max-json-keys, where a key costs JSON.parse the most', () => {
    const refused = refusedBy({ objectKeys: 1000, keys: 5, nodes: 1000 }, /more than 5 keys in all \(--max-json-keys\)/);
    assert.equal(refused('{"a":{"b":1,"c":[{"d":1}]},"e":"f:g"}'), false);
    assert.equal(refused('{"a":{"b":1,"c":[{"d":1,"x":2}]},"e":"f:g"}'), true);
    // The same keys again are keys again: what JSON.parse makes is counted, not what is new.
    assert.equal(refused(`[${Array(6).fill('{"a":0}').join(',')}]`), true);
  });

  it('admits bodies of many keys in new orders or new names up to the limits, which the layout counting once refused', () => {
    // The first 1, 2, ... 40 names of one run: 820 keys, 820 hidden classes for V8.
    const names = Array.from({ length: 40 }, (_, i) => `n${i}`);
    const prefixes = `[${names
      .map(
        (_, n) =>
          `{${names
            .slice(0, n + 1)
            .map((k) => `"${k}":0`)
            .join(',')}}`,
      )
      .join(',')}]`;
    assert.doesNotThrow(() => checkBody(prefixes, { objectKeys: 1000, keys: 820, nodes: 2000 }));
    assert.throws(() => checkBody(prefixes, { objectKeys: 1000, keys: 819, nodes: 2000 }), /more than 819 keys in all/);
  });

  it("admits, at the default limits, a pod of 2100 annotations (about 100 KB, inside Kubernetes' 256 KiB) with its managedFields entry", () => {
    const annotations = Object.fromEntries(Array.from({ length: 2100 }, (_, i) => [`example.com/setting-${i}`, `value-${i}-${'x'.repeat(20)}`]));
    const fields = Object.fromEntries(Object.keys(annotations).map((key) => [`f:${key}`, {}]));
    const pod = {
      metadata: {
        name: 'web',
        annotations,
        managedFields: [
          {
            manager: 'kubectl',
            operation: 'Update',
            apiVersion: 'v1',
            fieldsType: 'FieldsV1',
            fieldsV1: { 'f:metadata': { 'f:annotations': { '.': {}, ...fields } } },
          },
        ],
      },
      spec: { containers: [{ name: 'app', image: 'app' }] },
    };
    const text = JSON.stringify({ kind: 'AdmissionReview', apiVersion: ReviewVersion.V1, request: { uid: 'u', object: pod } });
    assert.doesNotThrow(() => checkBody(text));
    assert.equal(decodeBody(text).request.uid, 'u');
  });

  it('leaves malformed JSON to the parser', () => {
    assert.equal(refusedAtAll('{"unterminated'), false);
    assert.equal(refusedAtAll(']]]]'), false);
  });
});

describe('describeValue', () => {
  it('names an oversized value by its type or its first characters, never by walking it', () => {
    assert.equal(describeValue('x'.repeat(100)), JSON.stringify(`${'x'.repeat(64)}…`));
    assert.equal(describeValue({ toString: 'x' }), 'an object');
    assert.equal(describeValue([1]), 'a list');
  });
});

describe('encodeAnswer', () => {
  const review = { apiVersion: ReviewVersion.V1, request: { uid: 'a"b\\c' } };
  const asStringify = (body: ResponseBody, version: string = ReviewVersion.V1): string =>
    JSON.stringify({ apiVersion: version, kind: 'AdmissionReview', response: { uid: review.request.uid, ...body } });

  it('writes the bytes of JSON.stringify of the AdmissionReview, the uid first, for every kind of answer', () => {
    const bodies: ResponseBody[] = [
      { allowed: true },
      { allowed: true, auditAnnotations: { decision: 'skipped', reason: 'not "opted" in' } },
      { allowed: false, status: { code: 400, message: 'bad\n"pod"', reason: 'BadRequest' }, auditAnnotations: { decision: 'denied' } },
      { allowed: true, patchType: 'JSONPatch', patch: base64Patch('[]'), warnings: ['a "warning"'], auditAnnotations: { decision: 'injected' } },
    ];
    for (const body of bodies) assert.equal(encodeAnswer(review, body), asStringify(body));
    assert.equal(encodeAnswer({ ...review, apiVersion: ReviewVersion.V1Beta1 }, bodies[0]!), asStringify(bodies[0]!, ReviewVersion.V1Beta1));
  });

  it('writes the patch where JSON.stringify would, whatever the uid, the warnings and the annotations hold', () => {
    const patch = base64Patch(JSON.stringify([{ op: 'add', path: '/metadata/labels', value: { a: '"patch":""' } }]));
    const body: ResponseBody = {
      allowed: true,
      patchType: 'JSONPatch',
      patch,
      warnings: ['"patch":""', '\\"patch\\":\\"\\"'],
      auditAnnotations: { patch: '"patch":""' },
    };
    // Fields before the patch, whatever they hold (the handler puts only uid, allowed and patchType there).
    const before: ResponseBody = { allowed: true, auditAnnotations: { 'a"patch': '', patch: '' }, patchType: 'JSONPatch', patch };
    assert.equal(
      encodeAnswer({ apiVersion: ReviewVersion.V1, request: { uid: 'u' } }, before),
      JSON.stringify({ apiVersion: ReviewVersion.V1, kind: 'AdmissionReview', response: { uid: 'u', ...before } }),
    );
    for (const uid of ['"patch":""', 'u"patch":"', '"patchType":"JSONPatch","patch":""', '\\', ''])
      assert.equal(
        encodeAnswer({ apiVersion: ReviewVersion.V1, request: { uid } }, body),
        JSON.stringify({ apiVersion: ReviewVersion.V1, kind: 'AdmissionReview', response: { uid, ...body } }),
      );
  });
});

describe('apiserverEnvelope', () => {
  const body = (uid: string, apiVersion: string = ReviewVersion.V1): Buffer =>
    Buffer.from(`{"kind":"AdmissionReview","apiVersion":"${apiVersion}","request":{"uid":"${uid}","kind":{}}}`);

  it('reads the version and the uid of a body that begins as the apiserver writes one', () => {
    const uid = '2d4f5e1c-7a8b-4c9d-8e0f-1a2b3c4d5e6f';
    const text = body(uid, ReviewVersion.V1Beta1);
    assert.deepEqual(apiserverEnvelope(text), { version: ReviewVersion.V1Beta1, uid, uidEnd: text.indexOf(`${uid}"`) + uid.length });
  });

  it('reads nothing from any other body: another order, an escape or a byte beyond ASCII in the uid, an empty or overlong uid, a cut body', () => {
    const others = [
      Buffer.from('{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a"}}'),
      body('a\\u0041'),
      body('a-é'),
      body(''),
      body('x'.repeat(129)),
      body('a').subarray(0, 62),
      body('a', 'admission.k8s.io/v2'),
    ];
    for (const other of others) assert.equal(apiserverEnvelope(other), undefined, other.toString());
  });
});
