import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkBody, decodeBody, describeValue, encodeAnswer, encodePatch, MAX_KEY_FANOUT, MAX_NESTING, OWN_CONTEXT_KEYS, patchText, ReviewVersion, type BodyLimits, type ResponseBody } from '../../src/admission/codec.js';
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
const refusedAtAll = refusedBy({ objectKeys: 3, nodes: 10, objectLayouts: 1000, shortStrings: 1000 }, /./);

describe('checkBody', () => {
  it('counts only the structure outside strings: brackets, colons and escaped quotes inside strings are text', () => {
    assert.equal(refusedAtAll(JSON.stringify({ a: '[[[[{{{{:::::', b: 'say \\"[[[[\\" :::', c: '\\\\' })), false);
    assert.equal(refusedAtAll(JSON.stringify({ a: '"[[[[[[[[[[[[[[' })), false);
  });

  it('counts the keys of each object apart, siblings and parents included', () => {
    const keys = { objectKeys: 3, nodes: 1000, objectLayouts: 1000, shortStrings: 1000 };
    assert.doesNotThrow(() => checkBody('{"a":{"x":1,"y":2,"z":3},"b":{"x":1,"y":2,"z":3},"c":3}', keys));
    assert.throws(() => checkBody('{"a":{"x":1,"y":2,"z":3},"b":1,"c":2,"d":3}', keys), /an object of more than 3 keys \(--max-object-keys\)/);
    assert.throws(() => checkBody('{"a":[{"x":1,"y":2,"z":3,"w":4}]}', keys), /more than 3 keys/);
  });

  it('counts every object, list, key and list item as a node, at any depth', () => {
    const refused = refusedBy({ objectKeys: 1000, nodes: 10, objectLayouts: 1000, shortStrings: 1000 }, /more than 10 JSON nodes \(objects, lists, keys and list items; --max-json-nodes\)/);
    // An object, two keys, a list with its four items, an object and its key: 10.
    assert.equal(refused('{"a":[1,2,3,4],"b":{"c":1}}'), false);
    assert.equal(refused('{"a":[1,2,3,4,5],"b":{"c":1}}'), true);
    // List items alone: a list of short strings (a container's args) or numbers holds no object.
    assert.equal(refused(`[${Array(9).fill('"x"').join(',')}]`), false);
    assert.equal(refused(`[${Array(10).fill('"x"').join(',')}]`), true);
    assert.equal(refused(`[${Array(10).fill(0).join(' , ')}]`), true);
    // Keys alone: objects of keys new to V8 cost the most to parse.
    assert.equal(refused(`{${Array.from({ length: 9 }, (_, i) => `"k${i}":0`).join(',')}}`), false);
    assert.equal(refused(`{${Array.from({ length: 10 }, (_, i) => `"k${i}":0`).join(',')}}`), true);
    // A list and its first item, three more items, four objects: 9; one more item and object: 11.
    assert.equal(refused(`[${Array(4).fill('{}').join(',')}]`), false);
    assert.equal(refused(`[${Array(5).fill('{}').join(',')}]`), true);
  });

  it('jumps over long runs of white space and digits without losing the structure after them', () => {
    const nodes = { objectKeys: 1000, nodes: 10, objectLayouts: 1000, shortStrings: 1000 };
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

  it('counts object layouts: a key name once per distinct run of keys before it in its object', () => {
    const refused = refusedBy({ objectKeys: 1000, nodes: 1000, objectLayouts: 4, shortStrings: 1000 }, /more than 4 distinct object layouts \(runs of key names; --max-object-layouts\)/);
    // Objects of one kind share their layouts however many there are: a, a+b.
    assert.equal(refused(`[${Array(50).fill('{"a":0,"b":0}').join(',')}]`), false);
    // The same name at every depth: one layout.
    assert.equal(refused('{"a":{"a":{"a":{"a":{"a":{"a":0}}}}}}'), false);
    // Names the body has seen, in a new order: a, a+b, b, b+a, c.
    assert.equal(refused('[{"a":0,"b":0},{"b":0,"a":0},{"c":0}]'), true);
    // Five distinct names: a, a+b, a+b+c, x, y.
    assert.equal(refused('{"a":{"x":0},"b":{"y":0},"c":1}'), true);
    // Names are read as strings: quotes, colons and braces inside them are not structure.
    assert.equal(refused(`[${Array(20).fill('{"k:{\\"name\\":\\"A\\"}":{".":{}},"f:{x}":0}').join(',')}]`), false);
    assert.equal(refused('[{"k:{\\"name\\":\\"A\\"}":0},{"k:{\\"name\\":\\"B\\"}":0},{"a":0},{"b":0},{"c":0}]'), true);
  });

  it('counts a hidden class per key count and run of names, as V8 keeps a transition tree per key count; none for objects of 128 keys or more', () => {
    const passes = (text: string, limit: number): boolean => !refusedBy({ objectKeys: 1000, nodes: 10_000, objectLayouts: limit, shortStrings: 1000 }, new RegExp(`more than ${limit} distinct object layouts`))(text);
    // Two runs of names (a, a+b) but three hidden classes: a in objects of one key, a and a+b in objects of two.
    assert.equal(passes('[{"a":0},{"a":0,"b":0}]', 3), true);
    assert.equal(passes('[{"a":0},{"a":0,"b":0}]', 2), false);
    // The first 1, 2, ... 20 names of one run: 20 runs, 210 hidden classes (a body of such objects cost JSON.parse 90 to 190 ms).
    const names = Array.from({ length: 20 }, (_, i) => `n${i}`);
    const prefixes = `[${names.map((_, n) => `{${names.slice(0, n + 1).map((k) => `"${k}":0`).join(',')}}`).join(',')}]`;
    assert.equal(passes(prefixes, 210), true);
    assert.equal(passes(prefixes, 209), false);
    // An object of 128 keys is a dictionary: its hidden classes do not count (those of 127 keys do),
    // nor its runs past the 127th, which no smaller object can have.
    const keys = (n: number, prefix = 'k'): string => `{${Array.from({ length: n }, (_, i) => `"${prefix}${i}":0`).join(',')}}`;
    assert.equal(passes(`[${keys(128)},${keys(127)}]`, 128), true);
    assert.equal(passes(`[${keys(127)},${keys(126)}]`, 200), false);
    assert.equal(passes(`[${keys(900)},${keys(900, 'f:')}]`, 300), true);
    assert.equal(passes(`[${keys(900)},${keys(900, 'f:')}]`, 200), false, 'the first 127 runs of each still count');
  });

  it('counts an object\'s named keys toward its 128, not its array-index keys, which V8 keeps as elements', () => {
    const limits = (objectLayouts: number): BodyLimits => ({ objectKeys: 1000, nodes: 100_000, objectLayouts, shortStrings: 1000 });
    const refused = (limit: number): ((text: string) => boolean) => refusedBy(limits(limit), new RegExp(`more than ${limit} distinct object layouts`));
    const named = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, k) => `"${prefix}${k}":0`);
    // Keys "0" to "127", then 127 names new in each object: V8 builds 127 hidden classes for each.
    const indexed = (i: number): string => `{${[...Array.from({ length: 128 }, (_, k) => `"${k}":0`), ...named(`o${i}n`, 127)].join(',')}}`;
    assert.equal(refused(4096)(`[${Array.from({ length: 40 }, (_, i) => indexed(i)).join(',')}]`), true);
    // 127 names and one key more: a name makes the object a dictionary (its run stops at 127), an index does not.
    const withKey = (key: string): string => `{${[...named('k', 127), `"${key}":0`].join(',')}}`;
    const passes = (text: string): boolean => !refused(127)(text);
    assert.deepEqual(['01', '4294967295', '-1', 'x'].map((key) => passes(withKey(key))), [true, true, true, true], 'names');
    assert.deepEqual(['0', '4294967294', '\\u0030', '12'].map((key) => passes(withKey(key))), [false, false, false, false], 'indices');
  });

  it('admits, at the default limits, a pod of 2100 annotations (about 100 KB, inside Kubernetes\' 256 KiB) with its managedFields entry', () => {
    const annotations = Object.fromEntries(Array.from({ length: 2100 }, (_, i) => [`example.com/setting-${i}`, `value-${i}-${'x'.repeat(20)}`]));
    const fields = Object.fromEntries(Object.keys(annotations).map((key) => [`f:${key}`, {}]));
    const pod = { metadata: { name: 'web', annotations, managedFields: [{ manager: 'kubectl', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': { 'f:annotations': { '.': {}, ...fields } } } }] }, spec: { containers: [{ name: 'app', image: 'app' }] } };
    const text = JSON.stringify({ kind: 'AdmissionReview', apiVersion: ReviewVersion.V1, request: { uid: 'u', object: pod } });
    assert.doesNotThrow(() => checkBody(text));
    assert.equal(decodeBody(text).request.uid, 'u');
  });

  it(`refuses more than ${MAX_KEY_FANOUT} different names after the same keys in objects of one key count, in a body of more than ${OWN_CONTEXT_KEYS} keys`, () => {
    const limits: BodyLimits = { objectKeys: 10_000, nodes: 100_000, objectLayouts: 10_000, shortStrings: 1000 };
    // One-key objects of n distinct names, then copies of the first to pass OWN_CONTEXT_KEYS keys.
    const body = (n: number): string => `[${[...Array.from({ length: n }, (_, i) => `{"n${i}":0}`), ...Array(OWN_CONTEXT_KEYS).fill('{"n0":0}')].join(',')}]`;
    assert.doesNotThrow(() => checkBody(body(MAX_KEY_FANOUT), limits));
    assert.throws(() => checkBody(body(MAX_KEY_FANOUT + 1), limits), new RegExp(`objects of 1 keys with more than ${MAX_KEY_FANOUT} different names for key 1 after the same keys before it`));
    // The same after a shared first key: the names of the second key.
    const second = `[${[...Array.from({ length: MAX_KEY_FANOUT + 1 }, (_, i) => `{"a":0,"n${i}":0}`), ...Array(OWN_CONTEXT_KEYS).fill('{"a":0,"n0":0}')].join(',')}]`;
    assert.throws(() => checkBody(second, limits), new RegExp(`objects of 2 keys with more than ${MAX_KEY_FANOUT} different names for key 2`));
  });

  it(`parses a body of more than ${OWN_CONTEXT_KEYS} keys in a V8 context of its own, to the same data`, () => {
    const review = (items: number): string => JSON.stringify({ kind: 'AdmissionReview', apiVersion: ReviewVersion.V1, request: { uid: 'u', object: { items: Array.from({ length: items }, (_, i) => ({ name: `n${i}`, value: [i, null, true] })) } } });
    const large = review(OWN_CONTEXT_KEYS);
    const decoded = decodeBody(large);
    assert.deepEqual(JSON.parse(JSON.stringify(decoded.request)), JSON.parse(large).request);
    // Its objects come from that context (maps of their own, whatever earlier reviews left in this one's).
    assert.notEqual(Object.getPrototypeOf(decoded.request), Object.prototype);
    assert.equal(Array.isArray((decoded.request.object as { items: unknown }).items), true);
    // A smaller body is parsed here.
    assert.equal(Object.getPrototypeOf(decodeBody(review(10)).request), Object.prototype);
    assert.throws(() => decodeBody(large.slice(0, -1)), (err: unknown) => err instanceof InjectorError && err.code === 'BODY_MALFORMED');
  });

  it('counts short string values, 2 to 10 characters as written, which JSON.parse interns; never keys, shorter or longer strings', () => {
    const refused = refusedBy({ objectKeys: 1000, nodes: 1000, objectLayouts: 1000, shortStrings: 3 }, /more than 3 short strings \(values of 2 to 10 characters, each interned by JSON.parse; --max-short-strings\)/);
    // Three values of 2 and 10 characters, in a list and in an object: at the limit; a fourth is over it.
    assert.equal(refused('{"a":["ab","abcdefghij"],"b":"cd"}'), false);
    assert.equal(refused('{"a":["ab","abcdefghij"],"b":"cd","c":["ef"]}'), true);
    // Keys are not values, with white space before their colon or not; nor are strings of 0, 1 or 11 characters.
    assert.equal(refused('{"ab":"ab","cd" :"cd","ef"\n\t:"ef","gh":["", "x", "abcdefghijk"]}'), false);
    // The same string again is another value to intern (a lookup); counted alike.
    assert.equal(refused('["ab","ab","ab","ab"]'), true);
    // Escapes are decoded first, as V8 does: "\\n" and "\\u0041" are one character (not counted), "\\"a" two, and a
    // quote inside does not end the string.
    assert.equal(refused('["\\n","\\u0041","\\\"a","a\\\"","b\\\""]'), false);
    assert.equal(refused('["\\n","\\u0041","\\\"a","a\\\"","b\\\"","c\\\""]'), true);
    // Go's encoding/json writes < > & as \\u003c \\u003e \\u0026: "<abcdefgh>" is 20 characters written, 10 decoded, and
    // interned; "<abcdefghi>" (11) is not. Ten escapes of 6 characters each still make 10.
    const u = (s: string): string => s.replace(/</g, '\\u003c').replace(/>/g, '\\u003e');
    assert.equal(refused(JSON.stringify(['<abcdefgh>', '<bcdefghi>', '<cdefghij>', '<defghijk>']).replace(/[<>]/g, (m) => u(m))), true);
    assert.equal(refused(JSON.stringify(['<abcdefghi>', '<bcdefghij>', '<cdefghijk>', '<defghijkl>']).replace(/[<>]/g, (m) => u(m))), false);
    assert.equal(refused(`["${'\\u0061'.repeat(10)}","${'\\u0062'.repeat(10)}","${'\\u0063'.repeat(10)}","${'\\u0064'.repeat(10)}"]`), true);
    assert.equal(refused(`["${'\\u0061'.repeat(11)}","${'\\u0062'.repeat(11)}","${'\\u0063'.repeat(11)}","${'\\u0064'.repeat(11)}"]`), false);
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
      { allowed: true, patchType: 'JSONPatch', patch: 'W10=', warnings: ['a "warning"'], auditAnnotations: { decision: 'injected' } },
    ];
    for (const body of bodies) assert.equal(encodeAnswer(review, body), asStringify(body));
    assert.equal(encodeAnswer({ ...review, apiVersion: ReviewVersion.V1Beta1 }, bodies[0]!), asStringify(bodies[0]!, ReviewVersion.V1Beta1));
  });

  it('writes a patch made by patchText as it is, and escapes any other patch text', () => {
    const bytes = Buffer.from('[{"op":"add","path":"/metadata/labels/a~1b","value":"\u00e9\\"}]');
    const made = { allowed: true, patchType: 'JSONPatch', patch: patchText(bytes) } as const;
    assert.equal(made.patch, bytes.toString('base64'));
    assert.equal(encodeAnswer(review, made), asStringify(made));
    // Not made by patchText (the answer before was encoded): escaped as JSON.stringify would.
    const other = { allowed: true, patchType: 'JSONPatch', patch: 'not "base64"\\' } as const;
    assert.equal(encodeAnswer(review, other), asStringify(other));
    const stale = { allowed: true, patchType: 'JSONPatch', patch: 'a"b' } as const;
    patchText(Buffer.from('x'));
    assert.equal(encodeAnswer(review, stale), asStringify(stale));
  });

  const LIMIT = 1024 * 1024;
  const patchOf = (value: string): string => `[{"op":"add","path":"/metadata/labels/a","value":${JSON.stringify(value)}}]`;

  it('encodes a patch text equal to the last one once, and writes it as it is every time', () => {
    let made = 0;
    const toBytes = (text: string): Buffer => (made++, Buffer.from(text));
    const first = encodePatch(patchOf('caf\u00e9'), toBytes, LIMIT);
    assert.deepEqual([first.base64, first.bytes], [Buffer.from(patchOf('caf\u00e9')).toString('base64'), Buffer.byteLength(patchOf('caf\u00e9'))]);
    const again = encodePatch(patchOf('caf\u00e9').slice(0), toBytes, LIMIT);
    assert.equal(made, 1, 'an equal text (another string) is encoded once');
    assert.ok(again.base64 !== undefined);
    const body = { allowed: true, patchType: 'JSONPatch', patch: again.base64 } as const;
    assert.equal(encodeAnswer(review, body), asStringify(body));
    const other = encodePatch(patchOf('cafe'), toBytes, LIMIT);
    assert.equal(made, 2);
    assert.equal(other.base64, Buffer.from(patchOf('cafe')).toString('base64'));
    // A text equal to the one before the last is encoded again: only the last is kept.
    encodePatch(patchOf('caf\u00e9'), toBytes, LIMIT);
    assert.equal(made, 3);
  });

  it('only measures a patch over the limit, in bytes of UTF-8: never encodes it, nor keeps it in place of the last one', () => {
    const made: string[] = [];
    const toBytes = (text: string): Buffer => (made.push(text), Buffer.from(text));
    const small = patchOf('a');
    encodePatch(small, toBytes, LIMIT);
    // Three bytes of UTF-8 a character (the euro sign): over the limit in bytes, a third of it in characters.
    const base = Buffer.byteLength(patchOf(''));
    const euros = (n: number): string => patchOf('\u20ac'.repeat(n));
    const over = euros(Math.ceil((LIMIT - base + 1) / 3));
    assert.equal(Buffer.byteLength(over) > LIMIT && over.length < LIMIT / 2, true);
    const refused = encodePatch(over, toBytes, LIMIT);
    assert.deepEqual(refused, { bytes: Buffer.byteLength(over) });
    assert.deepEqual(made, [small], 'the refused patch never reaches toBytes, nor base64');
    // The last patch encoded is still the one kept, and written as it is.
    const kept = encodePatch(small, toBytes, LIMIT);
    assert.deepEqual(made, [small]);
    const body = { allowed: true, patchType: 'JSONPatch', patch: kept.base64 ?? '' } as const;
    assert.equal(encodeAnswer(review, body), asStringify(body));
    // A patch of exactly the limit is encoded; one byte more is not.
    const most = euros(Math.floor((LIMIT - base) / 3));
    const exact = most + ' '.repeat(LIMIT - Buffer.byteLength(most));
    assert.equal(Buffer.byteLength(exact), LIMIT);
    assert.equal(encodePatch(exact, toBytes, LIMIT).bytes, LIMIT);
    assert.equal(made.length, 2);
    assert.equal(encodePatch(`${exact} `, toBytes, LIMIT).base64, undefined);
    assert.equal(made.length, 2);
  });
});
