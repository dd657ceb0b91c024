import { createHash } from 'node:crypto';
import { Options } from '../config/config.js';
import { InjectorError } from '../errors.js';
import type { Container, LabelSelector, NamedItem, VolumeMount } from '../kube/types.js';
import { overrideAnnotations } from './override-keys.js';
import { compileValue, freshBytes, inputsOf, isDynamic, keysRead, materialize, type Compiled, type Input, type RenderValues } from './placeholders.js';
import type { Placement } from './placement.js';
import type { OverrideField } from './schema.js';
import { renderedChecks, type PlacedValue } from './values.js';

/** When a template's containers are native sidecars: always, never, or only in pods owned by a Job. */
export const NativeSidecar = { Always: 'always', Never: 'never', JobsOnly: 'jobs' } as const;
export type NativeSidecar = (typeof NativeSidecar)[keyof typeof NativeSidecar];

/** The `spec` of a SidecarTemplate as written, after schema validation. */
/** `spec.required`: the namespaces whose pods must carry the template. */
export interface RequiredSpec {
  readonly namespaceSelector?: LabelSelector;
}

export interface SidecarTemplateSpec {
  readonly default?: boolean;
  readonly nativeSidecar?: boolean | 'jobs';
  readonly placement?: Placement;
  readonly overrides?: readonly OverrideField[];
  readonly containers?: readonly Container[];
  readonly initContainers?: readonly Container[];
  readonly volumes?: readonly NamedItem[];
  readonly imagePullSecrets?: readonly NamedItem[];
  readonly volumeMounts?: readonly VolumeMount[];
  readonly env?: readonly NamedItem[];
  readonly annotations?: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly serviceAccountToken?: boolean | ServiceAccountTokenProjection;
  readonly appContainers?: AppContainers;
  readonly required?: RequiredSpec;
}

/** The object form of `serviceAccountToken`: the template's own projected token (core/v1 ServiceAccountTokenProjection, `path` optional). */
export interface ServiceAccountTokenProjection {
  readonly audience?: string;
  readonly expirationSeconds?: number;
  readonly path?: string;
}

/** Which of the pod's containers get the template's env and volumeMounts: absent lists leave every one. */
export interface AppContainers {
  readonly include?: readonly string[];
  readonly exclude?: readonly string[];
}

/**
 * Where the ServiceAccount admission plugin mounts the pod's token in every container
 * (plugin/pkg/admission/serviceaccount: DefaultAPITokenMountPath); where clients look for it.
 */
export const SERVICE_ACCOUNT_TOKEN_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

/** What one template contributes to one pod, with every placeholder expanded. */
export interface RenderedTemplate {
  readonly name: string;
  /** The namespace of a SidecarTemplate object it came from (absent: a file). */
  readonly namespace?: string;
  /** The template's version (see CompiledTemplate.version), recorded in the status annotation. */
  readonly version: string;
  /** Sidecar containers; for a native-sidecar template they carry `restartPolicy: Always`. */
  readonly containers: readonly Container[];
  readonly nativeSidecar: boolean;
  readonly initContainers: readonly Container[];
  readonly volumes: readonly NamedItem[];
  readonly imagePullSecrets: readonly NamedItem[];
  readonly volumeMounts: readonly VolumeMount[];
  readonly env: readonly NamedItem[];
  readonly annotations: Readonly<Record<string, string>>;
  readonly labels: Readonly<Record<string, string>>;
  /** Where the containers go; absent: after the pod's containers, ahead of its init containers. */
  readonly placement?: Placement;
  /** `serviceAccountToken: true`: its containers mount the pod's own token volume (mutate.ts finds it per pod). */
  readonly podToken?: true;
  /** The object form of `serviceAccountToken`: the name of the template's own token volume (in `volumes`, mounted by its containers). */
  readonly tokenVolume?: string;
  /** Which application containers get `env` and `volumeMounts`; absent: all of them. */
  readonly appContainers?: AppContainers;
}

/** A template validated and compiled once at load; rendering per review is cheap. */
export interface CompiledTemplate {
  readonly name: string;
  readonly file: string;
  /** The namespace of the SidecarTemplate object it came from (absent: a file). */
  readonly namespace?: string;
  /**
   * Digest of the template's source (name and spec as written): equal in every replica that loaded
   * the same template, different as soon as anything in it changes. Computed once at load.
   */
  readonly version: string;
  /** The spec as written: what the policies keep in the cluster, to compile this version again after a restart (src/policy/sync.ts). */
  readonly source: SidecarTemplateSpec;
  readonly isDefault: boolean;
  /** `spec.required`: a cluster-wide template every opted-in pod of these namespaces gets (required.ts). */
  readonly required?: RequiredSpec;
  readonly nativeSidecar: boolean;
  /** `jobs`: rendered as ordinary containers, turned into native sidecars for Job-owned pods. */
  readonly nativeMode: NativeSidecar;
  readonly placement?: Placement;
  /** Fields pods may override through annotations; applied to the first container. */
  readonly overrides: readonly OverrideField[];
  /** The normalized spec (native containers already carry `restartPolicy: Always`). */
  readonly spec: Required<Omit<SidecarTemplateSpec, 'default' | 'nativeSidecar' | 'placement' | 'overrides' | 'serviceAccountToken' | 'appContainers' | 'required'>>;
  /** The pod labels and annotations its placeholders read (a rendering changes only with these, the namespace, name and service account). */
  readonly reads: { readonly labels: ReadonlySet<string>; readonly annotations: ReadonlySet<string> };
  /** The label and annotation keys it adds or its placeholders read: the template's own, never a pod's stray key (keys.ts). */
  readonly keys: ReadonlySet<string>;
  /** It adds an annotation under a template's override prefix (overrides.ts), so a pod's overrides are read from the pod as stored. */
  readonly addsOverrideKeys: boolean;
  /** Values with a placeholder where Kubernetes has a rule (a label value, a name, an image): checked once rendered (values.ts). */
  readonly checks: readonly PlacedValue[];
  /**
   * `inJob`: the pod belongs to a Job, where a `nativeSidecar: jobs` template's containers are native
   * sidecars. `budget`: what the rendering may add to the pod, charged before anything is built
   * (RenderBudget); absent: unbounded, for values that hold nothing of a pod's (conflict checks).
   */
  render(values: RenderValues, inJob?: boolean, budget?: RenderBudget): RenderedTemplate;
}

/** Short sha256 digest of a JSON-serializable value. */
export function digestOf(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);
}

/**
 * Compiles a validated template spec. Throws PlaceholderError (with a JSON path relative to
 * `/spec`) when a string holds a placeholder outside the grammar.
 */
export function compileTemplate(name: string, file: string, spec: SidecarTemplateSpec, namespace?: string): CompiledTemplate {
  const nativeSidecar = spec.nativeSidecar === true;
  const token = typeof spec.serviceAccountToken === 'object' ? ownToken(name, spec.serviceAccountToken) : undefined;
  const withToken = (c: Container): Container => (token === undefined ? c : withTokenMount(c, token.mount));
  const normalized = deepFreeze({
    containers: (spec.containers ?? []).map((c) => withToken(nativeSidecar ? { ...c, restartPolicy: 'Always' } : c)),
    initContainers: (spec.initContainers ?? []).map(withToken),
    volumes: token === undefined ? (spec.volumes ?? []) : [...(spec.volumes ?? []), token.volume],
    imagePullSecrets: spec.imagePullSecrets ?? [],
    volumeMounts: spec.volumeMounts ?? [],
    env: spec.env ?? [],
    annotations: spec.annotations ?? {},
    labels: spec.labels ?? {},
  });
  const compiled = compileValue(normalized, '/spec');
  const version = templateVersion(name, spec);
  const base = {
    name,
    ...(namespace !== undefined && { namespace }),
    version,
    nativeSidecar,
    ...(spec.placement !== undefined && { placement: spec.placement }),
    ...(spec.serviceAccountToken === true && { podToken: true as const }),
    ...(token !== undefined && { tokenVolume: token.volume.name }),
    ...(spec.appContainers !== undefined && { appContainers: deepFreeze(spec.appContainers) }),
  };
  const size = { name, bytes: ownBytes(normalized, compiled) };
  const renderer = (shape: (r: RenderedTemplate) => RenderedTemplate): Renderer =>
    isDynamic(compiled) ? budgeted(compiled, size, (v) => shape({ ...base, ...(materialize(compiled, v) as typeof normalized) })) : constant(size, shape({ ...base, ...normalized }));
  const nativeMode = nativeSidecar ? NativeSidecar.Always : spec.nativeSidecar === 'jobs' ? NativeSidecar.JobsOnly : NativeSidecar.Never;
  const regular = renderer((r) => r);
  // A regular sidecar keeps a Job's pod running forever; a native one is stopped when the main
  // containers finish (KEP-753), so `nativeSidecar: jobs` renders native sidecars for Job pods only.
  const inJobs = nativeMode === NativeSidecar.JobsOnly ? renderer(asNative) : regular;
  const reads = keysRead(compiled);
  const keys = new Set([...Object.keys(normalized.labels), ...Object.keys(normalized.annotations), ...reads.labels, ...reads.annotations]);
  const extras = { nativeMode, overrides: Object.freeze([...(spec.overrides ?? [])]), ...(spec.placement !== undefined && { placement: deepFreeze(spec.placement) }) };
  return {
    name,
    file,
    ...(namespace !== undefined && { namespace }),
    version,
    source: spec,
    isDefault: spec.default === true,
    ...(spec.required !== undefined && { required: deepFreeze(spec.required) }),
    nativeSidecar,
    ...extras,
    spec: normalized,
    reads,
    keys,
    addsOverrideKeys: overrideAnnotations(normalized.annotations).size > 0,
    checks: renderedChecks(normalized),
    render: (v, inJob = false, budget) => (inJob ? inJobs(v, budget) : regular(v, budget)),
  };
}

/** A rendering with its containers as native sidecars (initContainers with restartPolicy: Always). */
function asNative(r: RenderedTemplate): RenderedTemplate {
  return { ...r, nativeSidecar: true, containers: r.containers.map((c) => ({ ...c, restartPolicy: 'Always' })) };
}

/**
 * The projected volume of `serviceAccountToken: {audience, expirationSeconds, path}` and its mount.
 * Its name is a DNS label derived from the template's name alone, so it is the same at every
 * re-invocation and in every replica, and two templates never share one.
 */
function ownToken(template: string, projection: ServiceAccountTokenProjection): { volume: NamedItem; mount: VolumeMount } {
  const name = `sa-token-${digestOf(template).slice(0, 10)}`;
  const serviceAccountToken = { ...projection, path: projection.path ?? 'token' };
  return { volume: { name, projected: { sources: [{ serviceAccountToken }] } }, mount: tokenMount(name) };
}

/** The read-only mount of a token volume where clients look for the ServiceAccount token. */
export function tokenMount(volume: string): VolumeMount {
  return { name: volume, mountPath: SERVICE_ACCOUNT_TOKEN_PATH, readOnly: true };
}

/** The container with that token mount, unless it already mounts something at that path (its own choice wins). */
export function withTokenMount(c: Container, mount: VolumeMount): Container {
  if ((c.volumeMounts ?? []).some((m) => m.mountPath === SERVICE_ACCOUNT_TOKEN_PATH)) return c;
  return { ...c, volumeMounts: [...(c.volumeMounts ?? []), mount] };
}

/**
 * The version of a template: a digest of its name and its spec as loaded (YAML read into values, so
 * comments and layout do not count, but every field does, including those that change nothing the
 * validator checks: a version names a source, not a meaning).
 */
function templateVersion(name: string, spec: SidecarTemplateSpec): string {
  return digestOf([name, spec]);
}

type Renderer = (v: RenderValues, budget?: RenderBudget) => RenderedTemplate;

/** A template's name and the bytes of its own text in a rendering (RenderBudget.charge). */
interface Size {
  readonly name: string;
  readonly bytes: number;
}

/** What the renderings for one pod may add to it: the patch limit (--max-patch-kib) at its default. */
export const DEFAULT_RENDER_BYTES = Options.maxPatchKib.schema.default * 1024;

/**
 * The bytes the renderings of the templates selected for one pod may add to it, counted before any
 * text is built: each template's own text (its JSON, without its placeholders), then each
 * placeholder's expansion (UTF-8), in order, stopping at the first that does not fit. A patch holds
 * at least what was rendered, so a rendering over the patch limit (--max-patch-kib) would be refused
 * later anyway; refused here, a pod value read 2000 times costs a few lookups instead of building
 * gigabytes (test/templates/template.test.ts "refuses a rendering over its budget").
 */
export class RenderBudget {
  #left: number;

  /**
   * `made`: the renderings made for this review so far, by key, shared by the budgets of one
   * review's rounds (settle in src/inject/render.ts renders the list again when a template reads a
   * key another adds): a template whose key did not change gets its rendering back, and a rendering
   * made twice for one pod is not taken for a second sighting.
   */
  constructor(
    readonly limit: number = DEFAULT_RENDER_BYTES,
    readonly made: Map<string, RenderedTemplate> = new Map(),
  ) {
    this.#left = limit;
  }

  /** Charges one rendering; throws RENDERING_TOO_LARGE naming the template and the placeholder that goes over. */
  charge(template: Size, inputs: readonly Input[], texts: readonly string[]): void {
    if (template.bytes > this.#left) throw this.#over(template.name, `the template's own text takes ${template.bytes} bytes; ask its owner to make it smaller`);
    let left = this.#left - template.bytes;
    for (let i = 0; i < texts.length; i++) {
      const bytes = Buffer.byteLength(texts[i]!);
      left -= bytes;
      if (left < 0) throw this.#over(template.name, expansionDetail(inputs, inputs[i]!.source, bytes));
    }
    this.#left = left;
  }

  #over(template: string, detail: string): InjectorError {
    return new InjectorError('RENDERING_TOO_LARGE', [template, this.limit, Options.maxPatchKib.flag, detail]);
  }
}

/** What a placeholder that went over the budget expands to, and how often the template reads it. */
function expansionDetail(inputs: readonly Input[], source: string, bytes: number): string {
  const times = inputs.reduce((n, input) => n + (input.source === source ? 1 : 0), 0);
  const shown = source.length <= 80 ? source : `${source.slice(0, 77)}...`;
  return `{{ ${shown} }} expands to ${bytes} bytes for this pod, ${times} time${times === 1 ? '' : 's'} in the template; shorten that value of the pod, or ask the template's owner to read it fewer times`;
}

/** The UTF-8 bytes of a template's JSON without its placeholders: what every rendering of it holds besides the expansions. */
function ownBytes(normalized: object, compiled: Compiled): number {
  const placeholders = inputsOf(compiled).reduce((n, input) => n + Buffer.byteLength(input.source) + 4, 0);
  return Math.max(0, Buffer.byteLength(JSON.stringify(normalized)) - placeholders);
}

/**
 * Renderings kept across every template, the oldest out first, bounded in bytes: the pods of one
 * ReplicaSet share namespace, generateName, labels and annotations, so a busy cluster renders each
 * template twice per workload (kept from its second sighting, below) instead of once per review, and the injection plan made of those
 * renderings is kept with them (src/inject/plan.ts). In process (bench/memos.ts, typical pod) the two
 * save about a third of the whole pipeline's CPU without the answer cache (60 vs 97 µs).
 * A rendering that allocates more than RENDER_ENTRY_BYTES (a long pod value, or long template
 * text around a placeholder) is made afresh for each pod, so no pod or template decides how much is
 * kept (test/templates/template.test.ts "keeps renderings within a byte budget"). The renderings of
 * a template no longer served are never used again and go out with age.
 */
const RENDER_CACHE_BYTES = 4 * 1024 * 1024;
/** The largest rendering kept: 256 of them fill the cache. */
const RENDER_ENTRY_BYTES = RENDER_CACHE_BYTES / 256;

const kept = new Map<string, { readonly rendered: RenderedTemplate; readonly bytes: number }>();
let keptBytes = 0;
/** Tells the renderers of two compilations apart in `kept`'s keys. */
let renderers = 0;

/**
 * First sightings remembered per renderer, by a 31-bit hash of their key: the pods of one
 * ReplicaSet arrive together, well within it. A rendering is kept on its second sighting only: a
 * pod whose values are its own (its name, a label no other pod has) renders for itself, takes no
 * entry and evicts none, and its rendering dies young instead of being moved to V8's old space with
 * the cache (test/templates/template.test.ts "keeps a rendering from its second sighting on, never
 * one made once"). Per renderer, so a pod selecting many templates does not shorten another's
 * window; hashes, so the window holds 64 small integers a template whatever its keys hold. Two keys of one hash only make a rendering kept on
 * its first sighting: what is kept is still found by its whole key.
 */
const RECENT_SIGHTINGS = 64;

/** True when `key` was rendered lately (it is then forgotten as a sighting); else remembers it. */
function sightedBefore(sightings: Set<number>, key: string): boolean {
  const h = fnv1a(key);
  if (sightings.delete(h)) return true;
  sightings.add(h);
  if (sightings.size > RECENT_SIGHTINGS) sightings.delete(sightings.values().next().value!);
  return false;
}

/** FNV-1a over the string's UTF-16 code units, as a small integer (31 bits). */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 1;
}

function keep(key: string, rendered: RenderedTemplate, bytes: number): void {
  for (const [oldest, entry] of kept) {
    if (keptBytes + bytes <= RENDER_CACHE_BYTES) break;
    kept.delete(oldest);
    keptBytes -= entry.bytes;
  }
  kept.set(key, { rendered, bytes });
  keptBytes += bytes;
}

/**
 * A dynamic template's renderer: the rendering charged to the budget before it is built, then kept
 * or reused (a kept rendering is frozen, as the constant one is, since reviews share it). The key is
 * the renderer's id and each expansion after its length, so no value a pod holds makes two lists
 * read alike.
 */
function budgeted(compiled: Compiled, size: Size, render: (v: RenderValues) => RenderedTemplate): Renderer {
  const inputs = inputsOf(compiled);
  const fresh = freshBytes(compiled);
  const id = `${(renderers++).toString(36)}|`;
  const sightings = new Set<number>();
  return (v, budget) => {
    const texts = inputs.map((input) => input.expand(v));
    budget?.charge(size, inputs, texts);
    // Counted before the key is built: UTF-16 at worst, in the rendering's strings and in the key.
    let keyLength = id.length;
    let bytes = fresh;
    for (const text of texts) {
      keyLength += String(text.length).length + 1 + text.length;
      bytes += 2 * text.length + NODE_BYTES;
    }
    bytes += 2 * keyLength;
    // A rendering made for one review only is left unfrozen: frozen means shared, and only a
    // shared one has its injection plan kept (src/inject/plan.ts), so a pod seen once leaves
    // nothing behind in either cache.
    if (bytes > RENDER_ENTRY_BYTES) return render(v);
    let key = id;
    for (const text of texts) key += `${text.length}:${text}`;
    const found = kept.get(key)?.rendered ?? budget?.made.get(key);
    if (found !== undefined) return found;
    const seenBefore = sightedBefore(sightings, key);
    const rendered = seenBefore ? deepFreeze(render(v)) : render(v);
    if (seenBefore) keep(key, rendered, bytes);
    budget?.made.set(key, rendered);
    return rendered;
  };
}

/** About what V8 allocates besides a string's characters, per expansion (its header, its slot in the key). */
const NODE_BYTES = 32;

function constant(size: Size, rendered: RenderedTemplate): Renderer {
  const frozen = deepFreeze(rendered);
  return (_v, budget) => {
    budget?.charge(size, [], []);
    return frozen;
  };
}

/** Freezes a parsed template so that no review can change the shared original by mistake. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const child of Object.values(value)) deepFreeze(child);
  return Object.freeze(value);
}
