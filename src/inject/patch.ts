import type { Container, NamedItem, Pod, PodSpec } from '../kube/types.js';
import { jsonOf, jsonStringBody } from '../patch/json.js';
import { escapeToken } from '../patch/pointer.js';
import { Keys } from './keys.js';
import { injectedAnnotations, injectedMetadata, injectedSpec, type Extension, type Injection } from './mutate.js';
import { copyWithKeys } from './render.js';

/** The JSON patch of an injection, as the mutating handler answers it. */
export interface InjectionPatch {
  /** The patch's JSON text (`[]` when there is nothing to change). */
  readonly text: string;
  /** Its operations. */
  readonly ops: number;
}

/**
 * The JSON patch that turns `pod` into applyInjection(pod, injection), written from the
 * injection's decisions without a mutated copy of the pod nor a walk of it. It is the one patch
 * generator: the mutating handler answers with it, and the CLI shows the pod it makes (it applies
 * the handler's answer). Byte for byte it is `JSON.stringify(diff(pod, applyInjection(pod,
 * injection)))` for the name-aware diff kept in test/helpers/diff.ts as an independent reference
 * (test/inject/patch.test.ts holds the two together over generated pods).
 *
 * It follows that diff's rules: a key the pod lacks is one `add` of its whole value (so no `add`
 * has a missing parent), anything else is changed in place, and the keys of an object are visited
 * in its enumeration order, the pod's own keys first and the added ones after, in the order they
 * are set. So where two changed keys of one object are both the pod's (`metadata` and `spec`,
 * `env` and `volumeMounts`), their order is read from the pod. `pod` is a pod as JSON.parse makes
 * it (podObject checked it).
 */
export function injectionPatch(pod: Pod, injection: Injection): InjectionPatch {
  const out = new PatchWriter();
  const meta = pod.metadata;
  const spec = pod.spec;
  if (meta !== undefined && spec !== undefined && firstOf(pod, 'metadata', 'spec') === 'spec') {
    specOps(out, spec, injection);
    metadataOps(out, meta, injection);
  } else {
    if (meta !== undefined) metadataOps(out, meta, injection);
    if (spec !== undefined) specOps(out, spec, injection);
    if (meta === undefined) out.add('/metadata', injectedMetadata(undefined, injection));
  }
  if (spec === undefined) out.add('/spec', injectedSpec(undefined, injection));
  return { text: out.text(), ops: out.ops };
}

/**
 * The patch's text, op by op. A path is given as it is written inside its JSON string: the writer
 * builds each from constant tokens, list positions and map keys, and only a key can hold anything
 * JSON escapes (keyToken), so no whole path is scanned for a quote it never holds.
 */
class PatchWriter {
  ops = 0;
  #text = '[';

  add(path: string, value: unknown): void {
    this.#text += `${this.ops++ > 0 ? ',' : ''}{"op":"add","path":"${path}","value":${jsonOf(value)}}`;
  }

  replace(path: string, value: unknown): void {
    this.#text += `${this.ops++ > 0 ? ',' : ''}{"op":"replace","path":"${path}","value":${jsonOf(value)}}`;
  }

  text(): string {
    return `${this.#text}]`;
  }
}

/**
 * A map key as a JSON Pointer token (RFC 6901), as written inside a JSON string. Only the
 * templates' keys come here, the same few in every review: their tokens are kept.
 */
function keyToken(key: string): string {
  let token = tokens.get(key);
  if (token === undefined) {
    token = jsonStringBody(escapeToken(key));
    if (tokens.size >= TOKENS_KEPT) tokens.clear();
    tokens.set(key, token);
  }
  return token;
}

const tokens = new Map<string, string>();
const TOKENS_KEPT = 1024;

type Meta = NonNullable<Pod['metadata']>;
const NONE: Readonly<Record<string, string>> = Object.freeze({});

function metadataOps(out: PatchWriter, meta: Meta, injection: Injection): void {
  const own = meta.annotations;
  const labels = meta.labels;
  const added = injection.labels;
  if (own !== undefined && labels !== undefined && added !== undefined && firstOf(meta, 'annotations', 'labels') === 'labels') {
    keyOps(out, '/metadata/labels', added);
    annotationOps(out, own, injection);
    return;
  }
  if (own !== undefined) annotationOps(out, own, injection);
  if (labels !== undefined && added !== undefined) keyOps(out, '/metadata/labels', added);
  // A map the pod lacks is added whole, after the pod's own keys: annotations, then labels.
  if (own === undefined) out.add('/metadata/annotations', injectedAnnotations(NONE, injection));
  if (labels === undefined && added !== undefined) out.add('/metadata/labels', copyWithKeys(NONE, added));
}

/**
 * The pod's annotations gain the templates' keys and the status. In the map's enumeration order:
 * keys that are array indices come first, in numeric order (the added ones among them are the
 * first ops), then the others as they were set: the pod's (the status, when the pod brought one of
 * another value, is replaced there), then the added ones, then the status when the pod had none.
 */
function annotationOps(out: PatchWriter, own: Readonly<Record<string, string>>, injection: Injection): void {
  const status = injection.plan.statusText;
  const ownStatus = Object.hasOwn(own, Keys.status) ? own[Keys.status] : undefined;
  let replaced = ownStatus === undefined || ownStatus === status;
  let statusAdded = false;
  const added = injection.annotations;
  for (const key in added) {
    if (!replaced && !isArrayIndex(key)) {
      out.replace(statusPath, status);
      replaced = true;
    }
    // A template may name the status key itself; the status is what the map holds under it.
    if (key === Keys.status) statusAdded = true;
    out.add(`/metadata/annotations/${keyToken(key)}`, key === Keys.status ? status : added[key]);
  }
  if (!replaced) out.replace(statusPath, status);
  if (ownStatus === undefined && !statusAdded) out.add(statusPath, status);
}

const statusPath = `/metadata/annotations/${keyToken(Keys.status)}`;

function keyOps(out: PatchWriter, path: string, added: Readonly<Record<string, string>>): void {
  for (const key in added) out.add(`${path}/${keyToken(key)}`, added[key]);
}

/** True for a key that is an array index (ECMA-262: a canonical numeric string below 2 ** 32 - 1), which an object enumerates first. */
function isArrayIndex(key: string): boolean {
  return ARRAY_INDEX.test(key) && Number(key) < 2 ** 32 - 1;
}

const ARRAY_INDEX = /^(?:0|[1-9][0-9]{0,9})$/;

/** The four lists of the spec an injection changes, in the order applyInjection sets them. */
const SpecLists = ['containers', 'initContainers', 'volumes', 'imagePullSecrets'] as const;
type SpecList = (typeof SpecLists)[number];

function specOps(out: PatchWriter, spec: PodSpec, injection: Injection): void {
  const changed = SpecLists.filter((list) => listChanged(spec, list, injection));
  const present = changed.filter((list) => spec[list] !== undefined);
  // The pod's own lists are changed in the order the pod has them; one it lacks is added after.
  for (const list of present.length > 1 ? inKeyOrder(spec, present) : present) listOps(out, spec, list, injection);
  for (const list of changed) if (spec[list] === undefined) out.add(`/spec/${list}`, wholeList(list, injection));
}

/** A list the pod lacks, as the injection makes it: the pod has none of its items, so every entry is one added. */
function wholeList(list: SpecList, injection: Injection): readonly unknown[] {
  switch (list) {
    case 'containers':
      return injection.containers ?? [];
    case 'initContainers':
      return injection.initContainers ?? [];
    case 'volumes':
      return injection.volumes;
    case 'imagePullSecrets':
      return injection.imagePullSecrets;
  }
}

function listChanged(spec: PodSpec, list: SpecList, injection: Injection): boolean {
  switch (list) {
    // applyInjection always sets `containers`: a pod without the list gets one, even empty.
    case 'containers':
      return spec.containers === undefined || injection.containers !== undefined || injection.extensions.length > 0;
    case 'initContainers':
      return injection.initContainers !== undefined;
    case 'volumes':
      return injection.volumes.length > 0;
    case 'imagePullSecrets':
      return injection.imagePullSecrets.length > 0;
  }
}

function listOps(out: PatchWriter, spec: PodSpec, list: SpecList, injection: Injection): void {
  switch (list) {
    case 'containers':
      return containerOps(out, spec.containers!, injection.containers, injection.extensions);
    case 'initContainers':
      return placedOps(out, '/spec/initContainers', injection.initContainers!);
    case 'volumes':
      return appendOps(out, '/spec/volumes', spec.volumes!.length, injection.volumes);
    case 'imagePullSecrets':
      return appendOps(out, '/spec/imagePullSecrets', spec.imagePullSecrets!.length, injection.imagePullSecrets);
  }
}

/** Each sidecar added where it lands, each extended container changed where it stands, in the list's order. */
function containerOps(out: PatchWriter, own: readonly Container[], placed: Injection['containers'], extensions: Injection['extensions']): void {
  if (placed === undefined) {
    for (let i = 0; i < extensions.length; i++) extensionOps(out, `/spec/containers/${i}`, own[i]!, extensions[i]);
    return;
  }
  for (let j = 0; j < placed.length; j++) {
    const e = placed[j]!;
    if (typeof e === 'number') extensionOps(out, `/spec/containers/${j}`, own[e]!, extensions[e]);
    else out.add(`/spec/containers/${j}`, e);
  }
}

function placedOps(out: PatchWriter, path: string, placed: readonly (number | Container)[]): void {
  for (let j = 0; j < placed.length; j++) {
    const e = placed[j]!;
    if (typeof e !== 'number') out.add(`${path}/${j}`, e);
  }
}

function appendOps(out: PatchWriter, path: string, length: number, items: readonly NamedItem[]): void {
  for (let k = 0; k < items.length; k++) out.add(`${path}/${length + k}`, items[k]);
}

function extensionOps(out: PatchWriter, path: string, c: Container, extension: Extension | undefined): void {
  if (extension === undefined) return;
  const env = extension.env.length > 0;
  const mounts = extension.volumeMounts.length > 0;
  const envFirst = !(mounts && c.volumeMounts !== undefined && (c.env === undefined || !env || firstOf(c, 'env', 'volumeMounts') === 'volumeMounts'));
  if (envFirst && env) itemOps(out, `${path}/env`, c.env, extension.env);
  if (mounts) itemOps(out, `${path}/volumeMounts`, c.volumeMounts, extension.volumeMounts);
  if (!envFirst && env) itemOps(out, `${path}/env`, c.env, extension.env);
}

/** Items appended to a list of the pod's, or the list added whole when the pod lacks it. */
function itemOps(out: PatchWriter, path: string, own: readonly unknown[] | undefined, items: readonly NamedItem[]): void {
  if (own === undefined) out.add(path, items);
  else appendOps(out, path, own.length, items);
}

/** Which of two keys, both in `object`, it enumerates first. */
function firstOf<A extends string, B extends string>(object: object, a: A, b: B): A | B {
  for (const key in object) {
    if (key === a) return a;
    if (key === b) return b;
  }
  return a;
}

/** `keys`, all in `object`, in its enumeration order. */
function inKeyOrder<K extends string>(object: object, keys: readonly K[]): K[] {
  const wanted = new Set<string>(keys);
  const out: K[] = [];
  for (const key in object) if (wanted.has(key)) out.push(key as K);
  return out;
}
