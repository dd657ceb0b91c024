import { createHash } from 'node:crypto';
import type { Container, NamedItem, VolumeMount } from '../kube/types.js';
import { overrideAnnotations } from './override-keys.js';
import { compileValue, inputsOf, isDynamic, keysRead, materialize, type Compiled, type RenderValues } from './placeholders.js';
import type { Placement } from './placement.js';
import type { OverrideField } from './schema.js';
import { renderedChecks, type PlacedValue } from './values.js';
import type { RequiredSpec } from './required.js';

/** When a template's containers are native sidecars: always, never, or only in pods owned by a Job. */
export const NativeSidecar = { Always: 'always', Never: 'never', JobsOnly: 'jobs' } as const;
export type NativeSidecar = (typeof NativeSidecar)[keyof typeof NativeSidecar];

/** The `spec` of a SidecarTemplate as written, after schema validation. */
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
  /** `inJob`: the pod belongs to a Job, where a `nativeSidecar: jobs` template's containers are native sidecars. */
  render(values: RenderValues, inJob?: boolean): RenderedTemplate;
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
  const renderer = (shape: (r: RenderedTemplate) => RenderedTemplate): ((v: RenderValues) => RenderedTemplate) =>
    isDynamic(compiled) ? memoized(compiled, (v) => shape({ ...base, ...(materialize(compiled, v) as typeof normalized) })) : constant(shape({ ...base, ...normalized }));
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
    isDefault: spec.default === true,
    ...(spec.required !== undefined && { required: deepFreeze(spec.required) }),
    nativeSidecar,
    ...extras,
    spec: normalized,
    reads,
    keys,
    addsOverrideKeys: overrideAnnotations(normalized.annotations).size > 0,
    checks: renderedChecks(normalized),
    render: (v, inJob = false) => (inJob ? inJobs(v) : regular(v)),
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

/** Renderings kept per template; pods of one workload expand the placeholders alike. */
const RENDER_CACHE_ENTRIES = 256;
/** Placeholder values longer than this in total are rendered afresh, so the cache stays small. */
const RENDER_CACHE_KEY_MAX = 2048;

/**
 * Reuses a rendering when every placeholder expands as it did for an earlier pod: the pods of one
 * ReplicaSet share namespace, generateName, labels and annotations, so a busy cluster renders (and
 * hashes) each template once per workload instead of once per review. The rendering is frozen, as
 * the constant one is, since reviews share it.
 *
 * The renderings are found through one map per placeholder, keyed by its expanded text, in the
 * order renderKey reads them: the same entries as a map keyed by renderKey's string (two reviews
 * meet the same one exactly when every placeholder expands alike), but a review whose rendering is
 * kept builds no key. The bounds are renderKey's: the entries, and the length of that key.
 */
function memoized(compiled: Compiled, render: (v: RenderValues) => RenderedTemplate): (v: RenderValues) => RenderedTemplate {
  const inputs = inputsOf(compiled);
  let root: Level = new Map();
  let entries = 0;
  const miss = (v: RenderValues): RenderedTemplate => {
    const texts = inputs.map((input) => input(v));
    const rendered = deepFreeze(render(v));
    if (texts.reduce((n, text) => n + keyLength(text), 0) > RENDER_CACHE_KEY_MAX) return rendered;
    if (entries >= RENDER_CACHE_ENTRIES) {
      root = new Map();
      entries = 0;
    }
    let level = root;
    for (let i = 0; i < texts.length - 1; i++) {
      let next = level.get(texts[i]!) as Level | undefined;
      if (next === undefined) level.set(texts[i]!, (next = new Map()));
      level = next;
    }
    level.set(texts[texts.length - 1] ?? '', rendered);
    entries++;
    return rendered;
  };
  return (v) => {
    let level = root;
    for (let i = 0; i < inputs.length; i++) {
      const next = level.get(inputs[i]!(v));
      if (next === undefined) return miss(v);
      if (i === inputs.length - 1) return next as RenderedTemplate;
      level = next as Level;
    }
    return (level.get('') as RenderedTemplate | undefined) ?? miss(v);
  };
}

/** One level of memoized's maps: the next level by a placeholder's text, or, at the last, the rendering. */
type Level = Map<string, Level | RenderedTemplate>;

/** The characters a text takes in renderKey's key: its length, a colon, the text. */
function keyLength(text: string): number {
  return String(text.length).length + 1 + text.length;
}

function constant(rendered: RenderedTemplate): () => RenderedTemplate {
  const frozen = deepFreeze(rendered);
  return () => frozen;
}

/** Freezes a parsed template so that no review can change the shared original by mistake. */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const child of Object.values(value)) deepFreeze(child);
  return Object.freeze(value);
}
