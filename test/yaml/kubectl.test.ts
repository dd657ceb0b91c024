import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { changesMeaningUnquoted, parseKubectl, resolvePlain, stringifyKubectl } from '../../src/yaml/kubectl.js';

/**
 * Each plain scalar with what kubectl makes of it: go-yaml v2's resolve (sigs.k8s.io/yaml/goyaml.v2,
 * resolve.go), decoded into interface{} and turned into JSON by sigs.k8s.io/yaml.
 */
const PLAIN: readonly [string, unknown][] = [
  // YAML 1.1 booleans, in the spellings go-yaml v2 lists, and near misses that stay strings.
  ['yes', true],
  ['Yes', true],
  ['YES', true],
  ['y', true],
  ['Y', true],
  ['on', true],
  ['On', true],
  ['ON', true],
  ['true', true],
  ['True', true],
  ['TRUE', true],
  ['no', false],
  ['No', false],
  ['NO', false],
  ['n', false],
  ['N', false],
  ['off', false],
  ['Off', false],
  ['OFF', false],
  ['false', false],
  ['False', false],
  ['FALSE', false],
  ['yES', 'yES'],
  ['tRUE', 'tRUE'],
  ['nO', 'nO'],
  ['oN', 'oN'],
  // Null.
  ['', null],
  ['~', null],
  ['null', null],
  ['Null', null],
  ['NULL', null],
  ['nULL', 'nULL'],
  // Integers: 1.1 octal with a leading 0, Go's 0o/0x/0b prefixes (strconv.ParseInt base 0), underscores, signs.
  ['0400', 256],
  ['0644', 420],
  ['0775', 509],
  ['0777', 511],
  ['0', 0],
  ['00', 0],
  ['-0400', -256],
  ['0o17', 15],
  ['0O17', 15],
  ['0x1F', 31],
  ['0X1f', 31],
  ['-0x1F', -31],
  ['+0x1F', 31],
  ['0b1010', 10],
  ['-0b11', -3],
  ['1_000', 1000],
  ['1__0', 10],
  ['+12', 12],
  ['-12', -12],
  ['12', 12],
  // Not octal, so a float: strconv.ParseFloat("08") is 8.
  ['08', 8],
  ['0400.5', 400.5],
  // Floats.
  ['1e3', 1000],
  ['1E3', 1000],
  ['1.5', 1.5],
  ['1.', 1],
  ['.5', 0.5],
  ['-.5', -0.5],
  ['+.5', 0.5],
  ['1.5_0', 1.5],
  ['.inf', Infinity],
  ['-.Inf', -Infinity],
  ['+.INF', Infinity],
  // Strings: go-yaml v2 has no sexagesimal numbers, keeps timestamps as text, and refuses bare prefixes.
  ['1:20', '1:20'],
  ['190:20:30', '190:20:30'],
  ['2001-12-14', '2001-12-14'],
  ['2001-12-14t21:59:43.10-05:00', '2001-12-14t21:59:43.10-05:00'],
  ['0x', '0x'],
  ['0o', '0o'],
  ['0b', '0b'],
  ['0b12', '0b12'],
  ['0o8', '0o8'],
  ['_1', '_1'],
  ['1.2.3', '1.2.3'],
  ['.', '.'],
  ['.5_0', '.5_0'],
  ['1e', '1e'],
  ['Infinity', 'Infinity'],
  ['NaN', 'NaN'],
  ['10.0.0.1', '10.0.0.1'],
  ['100m', '100m'],
  ['128Mi', '128Mi'],
  ['v1', 'v1'],
];

describe('kubectl YAML: reading', () => {
  for (const [text, meaning] of PLAIN) {
    it(`reads plain ${JSON.stringify(text)} as ${JSON.stringify(meaning)}`, () => {
      assert.deepEqual(resolvePlain(text), meaning);
      assert.deepEqual(parseKubectl(`v: ${text}\n`)[0]!.value, { v: meaning });
    });
  }

  it('reads quoted and block scalars as strings, and honours !!str and other tags', () => {
    const [doc] = parseKubectl(`a: "no"\nb: '0400'\nc: |\n  yes\nd: !!str 0400\ne: !!int "12"\nf: !custom on\n`);
    assert.deepEqual(doc!.value, { a: 'no', b: '0400', c: 'yes\n', d: '0400', e: 12, f: 'on' });
  });

  it('resolves map keys too, as kubectl does (`on:` is the key "true")', () => {
    assert.deepEqual(parseKubectl('on: push\n0400: x\n')[0]!.value, { true: 'push', 256: 'x' });
  });

  it('follows merge keys and anchors', () => {
    assert.deepEqual(parseKubectl('base: &b {mode: 0400}\nvol:\n  <<: *b\n  name: x\n')[0]!.value, { base: { mode: 256 }, vol: { mode: 256, name: 'x' } });
  });

  it("reads \\' in a double-quoted scalar as ', as go-yaml v2 does (the Kubernetes docs' envars-file-container.yaml)", () => {
    const text = `command: ['sh', '-c', "echo \\"A=\\'a\\'\\nB=\\'b\\'\\" > /data/config.env"]\nkept: "\\\\'"\nsingle: 'it''s \\'\nplain: a\\'b\n`;
    const [doc] = parseKubectl(text);
    assert.deepEqual(doc!.doc.errors, []);
    assert.deepEqual(doc!.value, { command: ['sh', '-c', `echo "A='a'\nB='b'" > /data/config.env`], kept: "\\'", single: "it's \\", plain: "a\\'b" });
  });

  it("reads \\' the same in a document that begins with {, as kubectl 1.33+ does (a JSON syntax error falls back to YAML)", () => {
    // kubectl up to 1.32 decoded such a file with encoding/json alone and refused the escape; since
    // kubernetes/kubernetes#130666 (1.33) YAMLOrJSONDecoder retries it as YAML. Checked with kubectl
    // v1.33.9 (`kubectl label --local -f pod.json a=b -o json` prints "echo 'hi'"; v1.32.4 refuses it).
    const [doc] = parseKubectl(`{"kind": "Pod", "spec": {"containers": [{"name": "a", "command": ["echo \\'hi\\'"]}]}}\n`);
    assert.deepEqual(doc!.doc.errors, []);
    assert.deepEqual(doc!.value, { kind: 'Pod', spec: { containers: [{ name: 'a', command: ["echo 'hi'"] }] } });
  });

  it('keeps syntax errors on the document for the caller to report with a position', () => {
    const [doc] = parseKubectl('a: [unclosed\n');
    assert.ok(doc!.doc.errors.length > 0);
  });
});

describe('kubectl YAML: writing', () => {
  for (const [text, meaning] of PLAIN) {
    if (typeof meaning === 'string') continue;
    it(`quotes the string ${JSON.stringify(text)}, which kubectl would read as ${JSON.stringify(meaning)}`, () => {
      assert.equal(changesMeaningUnquoted(text), true);
      const out = stringifyKubectl([{ v: text }]);
      assert.deepEqual(parseKubectl(out)[0]!.value, { v: text }, out);
    });
  }

  it('leaves strings plain when kubectl reads them back unchanged', () => {
    assert.equal(stringifyKubectl([{ cpu: '100m', image: 'busybox:1.36', path: '/var/log' }]), 'cpu: 100m\nimage: busybox:1.36\npath: /var/log\n');
  });

  it('writes file modes in octal, which kubectl reads back as the same number', () => {
    const out = stringifyKubectl([{ secret: { secretName: 's', defaultMode: 0o400, items: [{ key: 'k', path: 'p', mode: 0o644 }] } }]);
    assert.match(out, /defaultMode: 0400/);
    assert.match(out, /mode: 0644/);
    assert.deepEqual(parseKubectl(out)[0]!.value, { secret: { secretName: 's', defaultMode: 256, items: [{ key: 'k', path: 'p', mode: 420 }] } });
  });

  it('writes other integers named mode in decimal', () => {
    assert.equal(stringifyKubectl([{ spec: { mode: 10 } }]), 'spec:\n  mode: 10\n');
  });

  it('escapes YAML 1.1 line breaks (NEL, LS, PS) in strings', () => {
    const value = { a: 'x\u2028y', b: 'p\u0085q' };
    assert.deepEqual(parseKubectl(stringifyKubectl([value]))[0]!.value, value);
  });

  it('separates documents with ---', () => {
    assert.equal(stringifyKubectl([{ a: 1 }, { b: 'no' }]), 'a: 1\n---\nb: "no"\n');
  });
});
