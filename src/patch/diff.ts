import { isObject, type JsonObject } from '../kube/types.js';
import { escapeToken } from './pointer.js';

export { escapeToken };

/**
 * JSON Patch (RFC 6902) from the difference between an original and a mutated document, in the form
 * the kube-apiserver applies it (evanphx/json-patch v4): every `add` has an existing parent, keys are
 * escaped (`~0`, `~1`), and array positions are those of the array as it is when the op applies.
 *
 * The mutation is copy-on-write, so unchanged branches are the very same objects and are skipped by
 * identity: the cost is proportional to what changed, not to the size of the pod. Lists of named
 * items (containers, volumes, env, mounts) are matched by name, so an insertion anywhere in a list
 * is a single `add` and the pod's own entries (and their numbers) are never re-emitted.
 */

export interface Operation {
  readonly op: 'add' | 'remove' | 'replace';
  readonly path: string;
  readonly value?: unknown;
}

/** Computes the operations that turn `before` into `after`. */
export function diff(before: unknown, after: unknown): Operation[] {
  const ops: Operation[] = [];
  const plain: boolean[] = [];
  diffValue(before, after, '', true, { ops, plain });
  last = { ops, items: ops.slice(), plain };
  return ops;
}

/**
 * The last result of diff, with, for each operation, whether its path holds nothing JSON must
 * escape, known from its tokens as the walk made them. A pointer built level by level is a string
 * of strings, which encodePatch would otherwise have to flatten (about half a microsecond a path)
 * to look for a quote it almost never holds. The handlers encode what they just diffed; anything
 * else (another list, or this one changed since) is checked path by path.
 */
let last: { readonly ops: readonly Operation[]; readonly items: readonly Operation[]; readonly plain: readonly boolean[] } | undefined;

interface Found {
  readonly ops: Operation[];
  readonly plain: boolean[];
}

function push(found: Found, op: Operation, plain: boolean): void {
  found.ops.push(op);
  found.plain.push(plain);
}

function isPlainPath(ops: readonly Operation[], i: number): boolean {
  return last !== undefined && last.ops === ops && last.items.length === ops.length && last.items[i] === ops[i] && last.plain[i] === true;
}

/** A token JSON writes as it is: no quote, backslash, control character or surrogate. */
function isPlain(token: string): boolean {
  return !NEEDS_ESCAPE.test(token);
}

/**
 * `JSON.stringify(ops)`, byte for byte, without re-serializing what every review injects alike.
 * The values an injection adds are mostly the templates' own frozen objects (a sidecar container,
 * a volume), shared by every review; their JSON is kept per object. Only frozen objects are kept:
 * the product freezes nothing but whole rendered templates (deepFreeze), which never change.
 */
export function encodePatch(ops: readonly Operation[]): string {
  let out = '[';
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    if (i > 0) out += ',';
    out += OP_HEADS[op.op] + (isPlainPath(ops, i) ? `"${op.path}"` : jsonString(op.path));
    if (op.value !== undefined) out += `,"value":${jsonOf(op.value)}`;
    out += '}';
  }
  return `${out}]`;
}

const OP_HEADS: Readonly<Record<Operation['op'], string>> = { add: '{"op":"add","path":', remove: '{"op":"remove","path":', replace: '{"op":"replace","path":' };
/** What JSON.stringify escapes in a string: `"`, `\\`, control characters, and lone surrogates (ES2019's well-formed JSON.stringify). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** The characters of JSON.stringify(text) between its quotes. */
export function jsonStringBody(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text).slice(1, -1) : text;
}

/** JSON.stringify(text). A path is short and seldom holds anything to escape; JSON.stringify is a native call per string. */
export function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

const frozenJson = new WeakMap<object, string>();
/** JSON of the longer strings met lately (a status annotation is one string shared by every review of a workload). */
const stringJson = new Map<string, string>();
const STRING_JSON_MIN = 64;
const STRING_JSON_MAX = 4096;
const STRING_JSON_ENTRIES = 256;
/** Below this depth an object or array that is not frozen is written from its parts, so frozen parts reuse their JSON. */
const COMPOSE_DEPTH = 2;

/**
 * JSON.stringify(value), byte for byte. The values an injection adds are new lists and maps of
 * template items (a pod without volumes gets a new `volumes` list holding the template's frozen
 * ones), so the top levels are written here and the frozen items reused; deeper, anything not
 * frozen is left to JSON.stringify. Only JSON values reach this (parsed pods, templates read from
 * YAML): no undefined in a list, no toJSON.
 */
export function jsonOf(value: unknown, depth = 0): string {
  if (typeof value === 'string') return stringOf(value);
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  if (Object.isFrozen(value)) {
    let json = frozenJson.get(value);
    if (json === undefined) {
      json = JSON.stringify(value);
      frozenJson.set(value, json);
    }
    return json;
  }
  if (depth >= COMPOSE_DEPTH) return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i > 0 ? ',' : '') + jsonOf(value[i], depth + 1);
    return `${out}]`;
  }
  let out = '{';
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    // JSON.stringify leaves out a key whose value has no JSON.
    if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
    out += `${out.length > 1 ? ',' : ''}${jsonString(key)}:${jsonOf(v, depth + 1)}`;
  }
  return `${out}}`;
}

function stringOf(text: string): string {
  if (text.length < STRING_JSON_MIN || text.length > STRING_JSON_MAX) return jsonString(text);
  let json = stringJson.get(text);
  if (json === undefined) {
    json = jsonString(text);
    if (stringJson.size >= STRING_JSON_ENTRIES) stringJson.clear();
    stringJson.set(text, json);
  }
  return json;
}

function diffValue(a: unknown, b: unknown, path: string, plain: boolean, ops: Found): void {
  if (a === b) return;
  if (isObject(a) && isObject(b)) return diffObject(a, b, path, plain, ops);
  if (Array.isArray(a) && Array.isArray(b)) return diffArray(a, b, path, plain, ops);
  // The root cannot be replaced through evanphx/json-patch v4 (it needs a parent), and it never is here.
  push(ops, { op: 'replace', path, value: b }, plain);
}

function diffObject(a: JsonObject, b: JsonObject, path: string, plain: boolean, ops: Found): void {
  const changes: Found = { ops: [], plain: [] };
  let shared = 0;
  for (const key of Object.keys(b)) {
    const value = b[key];
    // Most keys of a copy-on-write result are the input's own values: one lookup skips them (a
    // JSON value is never undefined nor a function, so an equal value is `a`'s own), since a pod
    // may carry tens of thousands of annotations (issue 11).
    if (value !== undefined && a[key] === value) {
      shared++;
      continue;
    }
    const present = Object.hasOwn(a, key);
    if (present) shared++;
    if (present && a[key] === value) continue;
    const child = `${path}/${escapeToken(key)}`;
    const plainChild = plain && isPlain(key);
    if (!present) push(changes, { op: 'add', path: child, value }, plainChild);
    else diffValue(a[key], value, child, plainChild, changes);
  }
  // `b` holds every key of `a` when it holds as many of them as `a` has: nothing to remove.
  const keys = Object.keys(a);
  if (shared !== keys.length) {
    for (const key of keys) {
      if (!Object.hasOwn(b, key)) push(ops, { op: 'remove', path: `${path}/${escapeToken(key)}` }, plain && isPlain(key));
    }
  }
  for (let i = 0; i < changes.ops.length; i++) push(ops, changes.ops[i]!, changes.plain[i]!);
}

/**
 * Walks `after` once, matching each element of `before` in order, by identity or else by name.
 * Anything not matched is inserted where it stands. When `before` is not a subsequence of `after`
 * (something was removed or reordered, which the injector never does), the array is replaced whole.
 */
function diffArray(a: readonly unknown[], b: readonly unknown[], path: string, plain: boolean, ops: Found): void {
  const local: Found = { ops: [], plain: [] };
  // Built on the first element not matched by identity: a list the injector only appended to (a
  // container's thousand env vars) is walked once, with no set of its items (issue 11).
  let kept: ReadonlySet<unknown> | undefined;
  let i = 0;
  for (let j = 0; j < b.length; j++) {
    const x = a[i];
    const y = b[j];
    if (i < a.length && x === y) {
      i++;
      continue;
    }
    if (i < a.length && !(b.length > a.length && (kept ??= new Set(b)).has(x)) && matches(x, y)) {
      diffValue(x, y, `${path}/${j}`, plain, local);
      i++;
    } else {
      push(local, { op: 'add', path: `${path}/${j}`, value: y }, plain);
    }
  }
  if (i < a.length) {
    push(ops, { op: 'replace', path, value: b }, plain);
    return;
  }
  for (let i = 0; i < local.ops.length; i++) push(ops, local.ops[i]!, local.plain[i]!);
}

/** Two elements stand for the same item: the same named object, or equal scalars. */
function matches(x: unknown, y: unknown): boolean {
  if (isObject(x) && isObject(y)) {
    return typeof x['name'] === 'string' ? x['name'] === y['name'] : !Object.hasOwn(y, 'name');
  }
  if (Array.isArray(x) && Array.isArray(y)) return true;
  return x === y;
}
