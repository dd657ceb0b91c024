import { Document, Lexer, LineCounter, isMap, parseAllDocuments, visit, type Scalar } from 'yaml';

/**
 * YAML as kubectl reads it. kubectl and the apiserver decode YAML through sigs.k8s.io/yaml over
 * go-yaml v2 (sigs.k8s.io/yaml/goyaml.v2, resolve.go), which follows YAML 1.1: an unquoted `no` is
 * the boolean false and `0400` is the octal number 256. The npm `yaml` package reads 1.2 by default
 * (`no` a string, `0400` decimal 400) and its own 1.1 schema still differs from go-yaml (it reads
 * sexagesimal `1:20` as 80, timestamps as dates, and not `0o17` as octal). So documents are parsed
 * with the failsafe schema (every scalar a string) and each plain scalar is then resolved here by
 * go-yaml v2's rules; output quotes every string go-yaml would read as something else.
 * Every module that reads or writes user YAML (templates, `inject`/`explain` input and output) goes
 * through this one.
 */

/** go-yaml v2's table of plain scalars with a fixed meaning (resolve.go, resolveMapList). */
const FIXED: ReadonlyMap<string, unknown> = new Map<string, unknown>([
  ...['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'].map((s) => [s, true] as const),
  ...['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'].map((s) => [s, false] as const),
  ...['', '~', 'null', 'Null', 'NULL'].map((s) => [s, null] as const),
  ...['.nan', '.NaN', '.NAN'].map((s) => [s, Number.NaN] as const),
  ...['.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF'].map((s) => [s, Number.POSITIVE_INFINITY] as const),
  ...['-.inf', '-.Inf', '-.INF'].map((s) => [s, Number.NEGATIVE_INFINITY] as const),
]);

/** go-yaml v2 only tries numbers for scalars starting with a sign or a digit, floats also with '.'. */
const NUMERIC_START = /^[-+0-9]/;
/** yamlStyleFloat in resolve.go. */
const YAML_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
/** Go's strconv.ParseInt(s, 0, 64) syntax: sign, then 0x/0o/0b prefixes, a leading 0 for octal, or decimal. */
const GO_INT = /^[-+]?(0[xX][0-9a-fA-F]+|0[oO]?[0-7]*|0[bB][01]+|[1-9][0-9]*)$/;
/** Go's strconv.ParseFloat for a string starting with '.': digits, optional exponent. */
const GO_DOT_FLOAT = /^\.[0-9]+([eE][-+]?[0-9]+)?$/;
/** A timestamp (resolve.go parseTimestamp): go-yaml v2 keeps it a string when decoding into interface{}. */
const TIMESTAMP_START = /^[0-9]{4}-/;

/**
 * What an untagged plain scalar means to kubectl: go-yaml v2's `resolve("", text)`. Quoted and block
 * scalars are always strings and never come here.
 */
export function resolvePlain(text: string): unknown {
  if (FIXED.has(text)) return FIXED.get(text);
  if (text.startsWith('.')) return GO_DOT_FLOAT.test(text) ? Number(text) : text;
  if (!NUMERIC_START.test(text)) return text;
  // Timestamps (2001-12-14) stay strings: decode.go sets the original text for interface{} targets.
  if (TIMESTAMP_START.test(text)) return text;
  const plain = text.replace(/_/g, '');
  const int = goInt(plain);
  if (int !== undefined) return int;
  if (YAML_FLOAT.test(plain)) return Number(plain);
  return text;
}

/** strconv.ParseInt/ParseUint(s, 0, 64): `0400` octal, `0o17`, `0x1F`, `0b11`, with a sign. Beyond 64 bits: go-yaml's big.Int. */
function goInt(s: string): number | undefined {
  if (!GO_INT.test(s)) return undefined;
  const negative = s.startsWith('-');
  const body = s.replace(/^[-+]/, '');
  let digits: string;
  let radix: number;
  if (/^0[xX]/.test(body)) [digits, radix] = [body.slice(2), 16];
  else if (/^0[bB]/.test(body)) [digits, radix] = [body.slice(2), 2];
  else if (/^0[oO]/.test(body)) [digits, radix] = [body.slice(2), 8];
  else if (body.length > 1 && body.startsWith('0')) [digits, radix] = [body.slice(1), 8];
  else [digits, radix] = [body, 10];
  if (digits === '' && body !== '0') return undefined; // "0x", "0o", "0b" alone: Go refuses them
  const magnitude = digits === '' ? 0n : [...digits].reduce((acc, d) => acc * BigInt(radix) + BigInt(parseInt(d, radix)), 0n);
  return Number(negative ? -magnitude : magnitude);
}

/** What a scalar node means to kubectl, given its style and explicit tag. */
function scalarValue(node: Scalar): unknown {
  const text = String(node.value ?? '');
  const tag = node.tag;
  if (tag === 'tag:yaml.org,2002:str') return text;
  if (tag === 'tag:yaml.org,2002:binary') return Buffer.from(text.replace(/\s+/g, ''), 'base64').toString('latin1');
  // Quoted and block scalars are strings; so are scalars with a tag go-yaml cannot resolve (`!custom`).
  const resolvable = tag === undefined || tag.startsWith('tag:yaml.org,2002:');
  if (!resolvable) return text;
  if (node.type !== 'PLAIN' && tag === undefined) return text;
  return resolvePlain(text);
}

/** One YAML document read with kubectl's meaning. */
export interface KubectlDocument {
  /** The parsed document, scalars already resolved (for positions: `doc.getIn`, node ranges). */
  readonly doc: Document;
  /** The document as a plain value (JSON-like), or null when empty. */
  readonly value: unknown;
}

/** Every YAML (or JSON) document of a text, read as kubectl reads it. Syntax errors stay in `doc.errors`. */
export function parseKubectl(text: string, lineCounter: LineCounter = new LineCounter(), options: { uniqueKeys?: boolean } = {}): KubectlDocument[] {
  const docs = parseAllDocuments(goYamlEscapes(text), {
    schema: 'failsafe',
    merge: true,
    lineCounter,
    uniqueKeys: options.uniqueKeys ?? true,
    prettyErrors: false,
  });
  if (!Array.isArray(docs)) return []; // only comments: no document
  return docs.map((doc) => {
    if (doc.errors.length > 0) return { doc, value: null };
    visit(doc, {
      Scalar(_key, node) {
        // The merge key `<<` (go-yaml v2 merges too) is the library's own marker: left as it is.
        if (node.value === undefined && node.source === '<<') return;
        node.value = scalarValue(node);
      },
    });
    return { doc, value: doc.toJS() ?? null };
  });
}

/** Tokens the yaml Lexer emits that are not source text (lexer.ts: DOCUMENT, FLOW_END, SCALAR). */
const LEXER_MARKS: ReadonlySet<string> = new Set(['\x02', '\x18', '\x1f']);

/**
 * go-yaml v2 reads `\'` in a double-quoted scalar as `'` (scannerc.go, yaml_parser_scan_flow_scalar,
 * as libyaml does), so kubectl applies `command: ["sh", "-c", "echo \"A=\'a\'\""]` (the Kubernetes
 * docs' envars-file-container.yaml); YAML 1.2, and so the yaml package, refuses the escape. Each `\'`
 * of a double-quoted token becomes `'` before parsing: escapes are read in pairs, so `\\'` (a
 * backslash, then a quote) stays. A later column on that line then reads one less.
 */
function goYamlEscapes(text: string): string {
  if (!text.includes("\\'")) return text;
  let out = '';
  for (const token of new Lexer().lex(text)) {
    if (LEXER_MARKS.has(token)) continue;
    out += token.startsWith('"') ? token.replace(/\\([\s\S])/g, (escape, c: string) => (c === "'" ? "'" : escape)) : token;
  }
  return out;
}

/** Line and column (1-based) of a parse error, for messages. */
export function errorPosition(doc: Document, lineCounter: LineCounter): { line: number; column: number } | undefined {
  const err = doc.errors[0];
  if (err === undefined) return undefined;
  const pos = lineCounter.linePos(err.pos[0]);
  return { line: pos.line, column: pos.col };
}

/** Characters YAML 1.1 takes as line breaks (NEL, LS, PS): a plain or single-quoted string with them changes. */
const YAML11_BREAKS = /[\u0085\u2028\u2029]/;
/** File modes are printed in octal, as people write them (0400, not 256): `defaultMode`, and `mode` beside a `path` (KeyToPath, DownwardAPIVolumeFile). */
function isFileMode(key: string, siblings: unknown): boolean {
  if (key === 'defaultMode') return true;
  return key === 'mode' && isMap(siblings) && siblings.has('path');
}

/**
 * True when kubectl would not read `s` back as this string if it were written unquoted: `no`, `on`,
 * `y`, `~`, `null`, `0400`, `1e3`, `0o17`, `1_000`, ... (go-yaml v2's resolve gives something else).
 */
export function changesMeaningUnquoted(s: string): boolean {
  return resolvePlain(s) !== s || YAML11_BREAKS.test(s);
}

/**
 * Writes values as YAML that kubectl reads back to the same values: every string that would resolve
 * to a boolean, number or null is double-quoted, file modes are written in octal, and YAML 1.1 line
 * break characters are escaped. Documents are separated by `---`.
 */
export function stringifyKubectl(values: readonly unknown[]): string {
  return values.map((v) => kubectlDocument(v).toString({ lineWidth: 0 })).join('---\n');
}

function kubectlDocument(value: unknown): Document {
  const doc = new Document(value, { version: '1.1' });
  visit(doc, {
    Pair(_key, pair, path) {
      const key = pair.key as Scalar | null;
      const val = pair.value as Scalar | null;
      if (typeof key?.value !== 'string' || !isFileMode(key.value, path[path.length - 1])) return;
      if (typeof val?.value === 'number' && Number.isInteger(val.value) && val.value > 0 && val.value <= 0o7777) val.format = 'OCT';
    },
    Scalar(_key, node) {
      if (typeof node.value === 'string' && changesMeaningUnquoted(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  return doc;
}
