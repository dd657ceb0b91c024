/**
 * The JSON text of a patch's values, as JSON.stringify writes it byte for byte, written for the
 * mutating handler's patch (src/inject/patch.ts): the values an injection adds are mostly the
 * templates' own frozen objects (a sidecar container, a volume), shared by every review, so their
 * JSON is kept per object.
 */

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
