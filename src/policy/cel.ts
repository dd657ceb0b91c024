import { InjectorError } from '../errors.js';
import { CORE_V1_DEFINITIONS, type CoreDefinition } from '../generated/core-v1.js';
import { escapeToken } from '../patch/pointer.js';
import { CLOSE, EXPR, OPEN } from '../templates/placeholders.js';

/**
 * Template values written as CEL for the apiserver's admission policies. A MutatingAdmissionPolicy's
 * CEL is type-checked against the pod's schema, and its list and map literals must be homogeneous, so
 * an object goes in as a typed literal (`Object.spec.containers{name: "x", resources:
 * Object.spec.containers.resources{...}}`, the type named by its path in the pod) and a map of strings
 * as a map literal. The shape of each field comes from the same core/v1 definitions the template
 * schema uses (src/generated/core-v1.ts). Placeholders become CEL over `object` and `request`.
 * A value with no CEL form (a null list item, which the template schema lets through) throws
 * CEL_VALUE_UNWRITABLE naming its JSON path (`at`, the value's own path in the template): the
 * compiler turns it into that template's "not compiled" verdict (test/policy/compile.test.ts).
 */

/** A CEL string literal (double-quoted; JSON's escapes are CEL's for these characters). */
export function celString(text: string): string {
  return JSON.stringify(text);
}

/** The core/v1 definition each kind of template item has. */
export const Definition = {
  container: 'V1Container',
  volume: 'V1Volume',
  env: 'V1EnvVar',
  volumeMount: 'V1VolumeMount',
  reference: 'V1LocalObjectReference',
} as const;
export type Definition = (typeof Definition)[keyof typeof Definition];

/**
 * A template item as a typed CEL literal: `type` is its CEL type (`Object.spec.initContainers`),
 * `definition` its core/v1 definition. Strings go through placeholderCel; `expressions` gives
 * fields as CEL instead of their values; `at` is the item's JSON path in the template, for errors.
 */
export function celObject(
  value: Readonly<Record<string, unknown>>,
  type: string,
  definition: string,
  expressions: Readonly<Record<string, string>> = {},
  at = '',
): string {
  const def = CORE_V1_DEFINITIONS[definition];
  if (def === undefined) throw unwritable(at, `no core/v1 definition ${definition}`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw unwritable(at, `${describe(value)} where ${type} needs an object`);
  const fields: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    if (v === null || v === undefined || Object.hasOwn(expressions, key)) continue;
    fields.push(`${key}: ${celField(v, `${type}.${key}`, def, key, `${at}/${escapeToken(key)}`)}`);
  }
  // Fields whose value the pod decides, written as CEL by the caller.
  for (const [key, expression] of Object.entries(expressions)) fields.push(`${key}: ${expression}`);
  return `${type}{${fields.join(', ')}}`;
}

function celField(value: unknown, type: string, def: CoreDefinition, key: string, at: string): string {
  const prop = def.properties[key];
  if (prop === undefined) throw unwritable(at, `unknown field ${key} for ${type}`);
  return celTyped(value, type, prop, at);
}

function celTyped(value: unknown, type: string, prop: Readonly<Record<string, unknown>>, at: string): string {
  const ref = refOf(prop);
  if (ref !== undefined) return celObject(value as Record<string, unknown>, type, ref, {}, at);
  const items = prop['items'] as Readonly<Record<string, unknown>> | undefined;
  if (Array.isArray(value)) return `[${value.map((item, i) => celTyped(item, type, items ?? {}, `${at}/${i}`)).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== null && v !== undefined);
    return `{${entries.map(([k, v]) => `${celString(k)}: ${celScalar(v, `${at}/${escapeToken(k)}`)}`).join(', ')}}`;
  }
  return celScalar(value, at);
}

function refOf(prop: Readonly<Record<string, unknown>>): string | undefined {
  const ref = prop['$ref'];
  return typeof ref === 'string' ? ref.replace('#/$defs/', '') : undefined;
}

function celScalar(value: unknown, at: string): string {
  if (typeof value === 'string') return placeholderCel(value, at);
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : `double(${value})`;
  if (typeof value === 'boolean') return String(value);
  // A CEL list is of one type, and null is not a string: the webhook would inject the null, the policy cannot.
  throw unwritable(at, `${describe(value)} has no CEL form in a policy: give it a value or remove it`);
}

function describe(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'an object' : JSON.stringify(value);
}

function unwritable(at: string, why: string): InjectorError {
  return new InjectorError('CEL_VALUE_UNWRITABLE', [at === '' ? '(value)' : at, why]);
}

/**
 * A template string as a CEL string expression: the static parts as literals, each placeholder as
 * what it reads. The pod's name is its generateName while the name is empty (a controller's pod at
 * CREATE), as the webhook renders it; an empty value takes the `default`.
 */
export function placeholderCel(text: string, at = ''): string {
  if (!text.includes(OPEN)) return celString(text);
  const parts: string[] = [];
  let rest = text;
  while (rest.length > 0) {
    const open = rest.indexOf(OPEN);
    const close = open < 0 ? -1 : rest.indexOf(CLOSE, open + OPEN.length);
    if (open < 0 || close < 0) {
      parts.push(celString(rest));
      break;
    }
    if (open > 0) parts.push(celString(rest.slice(0, open)));
    parts.push(placeholderExpr(rest.slice(open + OPEN.length, close), at));
    rest = rest.slice(close + CLOSE.length);
  }
  return parts.length === 1 ? parts[0]! : `(${parts.join(' + ')})`;
}

function placeholderExpr(source: string, at: string): string {
  const m = EXPR.exec(source);
  if (m === null) throw unwritable(at, `unknown placeholder {{${source}}}`);
  const [, head, map, key1, key2, def1, def2] = m;
  const fallback = celString(def1 ?? def2 ?? '');
  const orDefault = (value: string): string => `(${value} != "" ? ${value} : ${fallback})`;
  if (head === 'namespace') return orDefault('request.namespace');
  if (head === 'serviceAccountName')
    return orDefault(
      `(object.spec.?serviceAccountName.orValue("") != "" ? object.spec.serviceAccountName : object.spec.?serviceAccount.orValue("") != "" ? object.spec.serviceAccount : "default")`,
    );
  if (head === 'pod.name') return orDefault(`(object.metadata.?name.orValue("") != "" ? object.metadata.name : object.metadata.?generateName.orValue(""))`);
  return orDefault(`object.metadata.?${map}[?${celString(key1 ?? key2 ?? '')}].orValue("")`);
}
