import type { Pod } from '../kube/types.js';
import { escapeToken } from '../patch/pointer.js';

/**
 * Placeholders are expanded inside the string values of an already-parsed template, never in its
 * YAML text: a value from the pod can fill a string but can never add structure to what is injected.
 * Each template is compiled once at load into a renderer that copies only the branches that hold a
 * placeholder and shares every static branch.
 */

/** The values a placeholder can read, gathered once per review. */
export interface RenderValues {
  readonly namespace: string;
  readonly podName: string;
  readonly serviceAccountName: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /**
   * Keys the selected templates add to the pod's labels and annotations (never keys the pod has),
   * read where the pod has none: the pod's maps plus these, without copying the pod's.
   */
  readonly addedLabels?: Readonly<Record<string, string>>;
  readonly addedAnnotations?: Readonly<Record<string, string>>;
}

/** Collects the placeholder values from a pod; the namespace comes from `request.namespace`. */
export function renderValues(pod: Pod, namespace: string): RenderValues {
  const meta = pod.metadata ?? {};
  const spec = pod.spec ?? {};
  return {
    namespace,
    // Controller-created pods have only generateName until the apiserver names them after admission.
    podName: meta.name || meta.generateName || '',
    // The ServiceAccount admission plugin runs before webhooks and fills this in; 'default' otherwise.
    serviceAccountName: spec.serviceAccountName || spec.serviceAccount || 'default',
    labels: meta.labels ?? {},
    annotations: meta.annotations ?? {},
  };
}

type Expr = (v: RenderValues) => string;

/** One placeholder of a template: its text as written (without the braces), and what it expands to for a pod. */
export interface Input {
  readonly source: string;
  readonly expand: Expr;
}

type Segment = string | Input;

/** A pod label or annotation a placeholder reads. */
export interface Read {
  readonly map: 'labels' | 'annotations';
  readonly key: string;
}

/**
 * A compiled value: either the static value itself, or a function that renders it, with the
 * placeholders it expands (`inputs`, in order), the pod keys they read, and `fresh`: about the bytes
 * each rendering allocates besides the expansions (the text around the placeholders, copied into
 * new strings, and the arrays and objects that hold them).
 */
export type Compiled =
  | { readonly static: unknown }
  | { readonly render: (v: RenderValues) => unknown; readonly inputs: readonly Input[]; readonly reads: readonly Read[]; readonly fresh: number };

/** The placeholder grammar, shared with the CEL compiler of admission policies (src/policy/cel.ts). */
export const OPEN = '{{';
export const CLOSE = '}}';
const QUOTED = String.raw`(?:'([^']*)'|"([^"]*)")`;
/** One placeholder's text between OPEN and CLOSE: what it reads (groups 1-4) and its default (groups 5-6). */
export const EXPR = new RegExp(
  String.raw`^\s*(namespace|serviceAccountName|pod\.name|pod\.(labels|annotations)\[\s*${QUOTED}\s*\])` +
    String.raw`\s*(?:\|\s*default\s+${QUOTED}\s*)?$`,
);

/**
 * The placeholders of a text, by what they read (`namespace`, `pod.name`, `serviceAccountName`,
 * `pod.labels`, `pod.annotations`), in order; none for a text without `{{` or not in the grammar.
 */
export function placeholdersOf(text: string): string[] {
  const out: string[] = [];
  for (let open = text.indexOf(OPEN); open >= 0; open = text.indexOf(OPEN, open + OPEN.length)) {
    const close = text.indexOf(CLOSE, open + OPEN.length);
    if (close < 0) break;
    const m = EXPR.exec(text.slice(open + OPEN.length, close));
    if (m !== null) out.push(m[2] === undefined ? m[1]! : `pod.${m[2]}`);
  }
  return out;
}

/** Thrown at load time for a placeholder that is not in the grammar; `path` is a JSON pointer. */
export class PlaceholderError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
    this.name = 'PlaceholderError';
  }
}

/** Compiles every string value below `value`; branches without placeholders stay shared. */
export function compileValue(value: unknown, path = ''): Compiled {
  if (typeof value === 'string') return compileString(value, path);
  if (Array.isArray(value)) return compileArray(value, path);
  if (typeof value === 'object' && value !== null) return compileObject(value as Record<string, unknown>, path);
  return { static: value };
}

/**
 * Every placeholder fault below `value`, the first of each string, so that lint and a refused load
 * name them all at once instead of one per run; compileValue stops at the first.
 */
export function placeholderFaults(value: unknown, path = ''): PlaceholderError[] {
  if (typeof value === 'string') {
    try {
      compileString(value, path);
      return [];
    } catch (err) {
      if (err instanceof PlaceholderError) return [err];
      throw err;
    }
  }
  if (Array.isArray(value)) return value.flatMap((item, i) => placeholderFaults(item, `${path}/${i}`));
  if (typeof value === 'object' && value !== null) return Object.entries(value).flatMap(([k, v]) => placeholderFaults(v, `${path}/${escapeToken(k)}`));
  return [];
}

function compileArray(items: unknown[], path: string): Compiled {
  const parts = items.map((item, i) => compileValue(item, `${path}/${i}`));
  if (parts.every(isStatic)) return { static: items };
  return { render: (v) => parts.map((p) => materialize(p, v)), inputs: partInputs(parts), reads: readsOf(parts), fresh: freshOf(parts) + NODE_BYTES * (parts.length + 1) };
}

function compileObject(obj: Record<string, unknown>, path: string): Compiled {
  const keys = Object.keys(obj);
  const parts = keys.map((k) => compileValue(obj[k], `${path}/${escapeToken(k)}`));
  if (parts.every(isStatic)) return { static: obj };
  return {
    render: (v) => {
      const out: Record<string, unknown> = {};
      for (let i = 0; i < keys.length; i++) out[keys[i]!] = materialize(parts[i]!, v);
      return out;
    },
    inputs: partInputs(parts),
    reads: readsOf(parts),
    fresh: freshOf(parts) + NODE_BYTES * (keys.length + 1),
  };
}

function compileString(text: string, path: string): Compiled {
  if (!text.includes(OPEN)) return { static: text };
  const segments: Segment[] = [];
  const reads: Read[] = [];
  let rest = text;
  while (rest.length > 0) {
    const open = rest.indexOf(OPEN);
    if (open < 0) {
      segments.push(rest);
      break;
    }
    if (open > 0) segments.push(rest.slice(0, open));
    const close = rest.indexOf(CLOSE, open + OPEN.length);
    if (close < 0) throw new PlaceholderError(path, `unterminated placeholder in "${text}": missing "}}"`);
    segments.push(compileExpr(rest.slice(open + OPEN.length, close), path, reads));
    rest = rest.slice(close + CLOSE.length);
  }
  return {
    render: (v) => segments.map((s) => (typeof s === 'string' ? s : s.expand(v))).join(''),
    inputs: segments.filter((s): s is Input => typeof s !== 'string'),
    reads,
    fresh: segments.reduce((n, s) => n + (typeof s === 'string' ? 2 * s.length : 0), NODE_BYTES),
  };
}

function compileExpr(source: string, path: string, reads: Read[]): Input {
  return { source: source.trim(), expand: compileExpand(source, path, reads) };
}

function compileExpand(source: string, path: string, reads: Read[]): Expr {
  const m = EXPR.exec(source);
  if (m === null) {
    throw new PlaceholderError(
      path,
      `unknown placeholder "{{${source}}}"; use namespace, pod.name, serviceAccountName, ` +
        `pod.labels['KEY'], pod.annotations['KEY'], optionally followed by | default 'VALUE'`,
    );
  }
  const [, head, map, key1, key2, def1, def2] = m;
  const fallback = def1 ?? def2 ?? '';
  const key = key1 ?? key2 ?? '';
  if (head === 'namespace') return (v) => v.namespace || fallback;
  if (head === 'serviceAccountName') return (v) => v.serviceAccountName || fallback;
  if (head === 'pod.name') return (v) => v.podName || fallback;
  reads.push({ map: map === 'labels' ? 'labels' : 'annotations', key });
  if (map === 'labels') return (v) => lookup(v.labels, key) ?? lookup(v.addedLabels, key) ?? fallback;
  return (v) => lookup(v.annotations, key) ?? lookup(v.addedAnnotations, key) ?? fallback;
}

// Own properties only: a key such as "__proto__" or "constructor" must never reach the prototype.
function lookup(map: Readonly<Record<string, string>> | undefined, key: string): string | undefined {
  if (map === undefined || !Object.prototype.hasOwnProperty.call(map, key)) return undefined;
  const value = map[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function isStatic(c: Compiled): c is { readonly static: unknown } {
  return 'static' in c;
}

/** Produces the value of a compiled branch for one review. */
export function materialize(c: Compiled, v: RenderValues): unknown {
  return isStatic(c) ? c.static : c.render(v);
}

function partInputs(parts: readonly Compiled[]): Input[] {
  return parts.flatMap((p) => (isStatic(p) ? [] : p.inputs));
}

/** About what V8 allocates for an object's slot, an array's element or a string's header. */
const NODE_BYTES = 16;

function freshOf(parts: readonly Compiled[]): number {
  return parts.reduce((n, p) => n + (isStatic(p) ? 0 : p.fresh), 0);
}

function readsOf(parts: readonly Compiled[]): Read[] {
  return parts.flatMap((p) => (isStatic(p) ? [] : p.reads));
}

/** The pod labels and annotations the placeholders of a compiled branch read. */
export function keysRead(c: Compiled): { readonly labels: ReadonlySet<string>; readonly annotations: ReadonlySet<string> } {
  const reads = isStatic(c) ? [] : c.reads;
  return { labels: new Set(reads.filter((r) => r.map === 'labels').map((r) => r.key)), annotations: new Set(reads.filter((r) => r.map === 'annotations').map((r) => r.key)) };
}

/** The placeholders of a compiled branch, in order (none for a static one). */
export function inputsOf(c: Compiled): readonly Input[] {
  return isStatic(c) ? [] : c.inputs;
}

/** About the bytes each rendering of the branch allocates besides the expansions (Compiled's `fresh`). */
export function freshBytes(c: Compiled): number {
  return isStatic(c) ? 0 : c.fresh;
}

/** True when the compiled branch holds at least one placeholder. */
export function isDynamic(c: Compiled): boolean {
  return !isStatic(c);
}
