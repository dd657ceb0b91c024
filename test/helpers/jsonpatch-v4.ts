/**
 * A small, strict JSON Patch applier with the semantics of gopkg.in/evanphx/json-patch.v4, the
 * library the kube-apiserver applies webhook patches with (mutating/dispatcher.go: DecodePatch, then
 * Apply with no options). Written apart from src/patch so that a patch is checked by a second,
 * independent reading of the rules, and stricter than v4 wherever v4 is lenient, so that anything
 * it accepts, v4 accepts too:
 *
 * - `add` needs an existing parent; a missing or `null` parent fails ("doc is missing path").
 * - Tokens are decoded `~1` -> `/`, `~0` -> `~` in one left-to-right pass (`~01` is `~1`); any other
 *   `~` escape is refused.
 * - Array indices are plain decimal; `-` appends on `add`; an index greater than the length fails
 *   (equal to the length appends on `add`). v4 also takes negative indices; this applier refuses them.
 * - `remove` and `replace` need the target to exist (v4's `replace` on a missing object key quietly
 *   adds it; this applier refuses).
 * - The root (empty path) cannot be changed; an unknown `op` fails; `add` and `replace` need `value`.
 */

export interface PatchOperation {
  readonly op: string;
  readonly path: string;
  readonly value?: unknown;
}

/** Why a patch does not apply, with the failing operation's index. */
export class PatchError extends Error {
  constructor(
    readonly index: number,
    message: string,
  ) {
    super(`operation ${index}: ${message}`);
    this.name = 'PatchError';
  }
}

type Container = Record<string, unknown> | unknown[];

/** Applies `ops` to a deep copy of `doc` and returns the result; throws PatchError on the first op that does not apply. */
export function applyPatchV4<T>(doc: T, ops: readonly PatchOperation[]): T {
  let out = structuredClone(doc);
  ops.forEach((op, i) => {
    out = applyOne(out, op, (message) => new PatchError(i, `${op.op} ${op.path}: ${message}`));
  });
  return out;
}

function applyOne<T>(doc: T, op: PatchOperation, fail: (message: string) => PatchError): T {
  if (op.op !== 'add' && op.op !== 'remove' && op.op !== 'replace') throw fail(`unexpected kind "${op.op}"`);
  if ((op.op === 'add' || op.op === 'replace') && !Object.hasOwn(op, 'value')) throw fail('missing value');
  const tokens = parsePointer(op.path, fail);
  if (tokens.length === 0) throw fail('the root cannot be patched');
  const parent = findParent(doc, tokens.slice(0, -1), fail);
  const key = tokens[tokens.length - 1]!;
  const value = structuredClone(op.value);
  if (Array.isArray(parent)) applyToArray(parent, key, op.op, value, fail);
  else applyToObject(parent, key, op.op, value, fail);
  return doc;
}

/** RFC 6901 tokens of a pointer. */
export function parsePointer(path: string, fail: (message: string) => Error = (m) => new Error(m)): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw fail('a path must start with "/"');
  return path
    .slice(1)
    .split('/')
    .map((t) => {
      if (/~(?![01])/.test(t)) throw fail(`invalid escape in token "${t}"`);
      return t.replace(/~[01]/g, (e) => (e === '~1' ? '/' : '~'));
    });
}

function findParent(doc: unknown, tokens: readonly string[], fail: (message: string) => PatchError): Container {
  let at: unknown = doc;
  for (const t of tokens) {
    if (Array.isArray(at)) at = at[index(t, at.length - 1, fail)];
    else if (isObject(at) && Object.hasOwn(at, t)) at = at[t];
    else throw fail('doc is missing path: missing value');
  }
  if (!Array.isArray(at) && !isObject(at)) throw fail('doc is missing path: missing value');
  return at;
}

function applyToArray(list: unknown[], token: string, op: string, value: unknown, fail: (message: string) => PatchError): void {
  if (op === 'add') {
    if (token === '-') list.push(value);
    else list.splice(index(token, list.length, fail), 0, value);
    return;
  }
  const i = index(token, list.length - 1, fail);
  if (op === 'remove') list.splice(i, 1);
  else list[i] = value;
}

function applyToObject(obj: Record<string, unknown>, key: string, op: string, value: unknown, fail: (message: string) => PatchError): void {
  if (op !== 'add' && !Object.hasOwn(obj, key)) throw fail(`unable to ${op} nonexistent key "${key}"`);
  if (op === 'remove') delete obj[key];
  // defineProperty, not assignment: a "__proto__" key must become a key, as it does in Go.
  else Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function index(token: string, max: number, fail: (message: string) => PatchError): number {
  if (!/^(0|[1-9][0-9]*)$/.test(token)) throw fail(`"${token}" is not an array index`);
  const i = Number(token);
  if (i > max) throw fail(`Unable to access invalid index: ${i}`);
  return i;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
