import { isObject, type Container, type Pod } from '../kube/types.js';
import type { RenderedTemplate } from '../templates/template.js';
import { imageRepository } from '../kube-values/image.js';
import { Keys } from './keys.js';

/**
 * The status annotation `sidecar-injector.io/status`: what /mutate injected, per template, so that a
 * replica serving another version of the templates can still tell a correctly injected pod. Example:
 *
 *   {"templates":["log-shipper","proxy"],"injected":[
 *     {"template":"log-shipper","version":"3f0c…","containers":{"log-shipper":"docker.io/fluent/fluent-bit"},"volumes":["app-logs"]},
 *     {"template":"proxy","version":"9a41…","initContainers":{"envoy":"docker.io/envoyproxy/envoy"}}]}
 *
 * An install with a revision (--revision canary) adds `"revision":"canary"`, so `drift` and a person
 * reading the pod can tell which install's templates it carries.
 *
 * `templates` keeps the field of the earlier format (`{"templates":[...],"digest":"..."}`), which
 * had no versions; `containers` and `initContainers` (native sidecars) map each sidecar's name to
 * its normalized image repository. Only /mutate writes it, replacing any value the pod came with.
 */
export interface InjectionStatus {
  readonly templates: readonly string[];
  readonly injected: readonly TemplateRecord[];
  /** The revision of the install that injected (--revision, the pod's sidecar-injector.io/rev); absent for the default install. */
  readonly revision?: string;
}

/** What one template put into the pod. */
export interface TemplateRecord {
  readonly template: string;
  /** The namespace of the SidecarTemplate object; absent for a template read from files. */
  readonly namespace?: string;
  /** The template's version (CompiledTemplate.version). */
  readonly version: string;
  /** Regular sidecar containers: name -> image repository. */
  readonly containers?: Readonly<Record<string, string>>;
  /** Native sidecars (initContainers with restartPolicy: Always): name -> image repository. */
  readonly initContainers?: Readonly<Record<string, string>>;
  readonly volumes?: readonly string[];
}

/** How a pod's status annotation reads. */
export const StatusFormat = {
  /** No status annotation. */
  None: 'none',
  /** Not JSON of either format: ignored. */
  Invalid: 'invalid',
  /** The format of releases before template versions: template names only. */
  Unversioned: 'unversioned',
  Versioned: 'versioned',
} as const;
export type StatusFormat = (typeof StatusFormat)[keyof typeof StatusFormat];

export type RecordedStatus =
  | { readonly format: typeof StatusFormat.None }
  | { readonly format: typeof StatusFormat.Invalid }
  | { readonly format: typeof StatusFormat.Unversioned; readonly templates: readonly string[] }
  | { readonly format: typeof StatusFormat.Versioned; readonly status: InjectionStatus };

/** The status of an injection of these rendered templates by the install of `revision` ('' for the default install). */
export function statusOf(rendered: readonly RenderedTemplate[], revision = ''): InjectionStatus {
  return { templates: rendered.map((r) => r.name), injected: rendered.map(recordOf), ...(revision !== '' && { revision }) };
}

/** The annotation's value. */
export function encodeStatusAnnotation(status: InjectionStatus): string {
  return JSON.stringify(status);
}

function recordOf(r: RenderedTemplate): TemplateRecord {
  const sidecars = repositories(r.containers);
  return {
    template: r.name,
    ...(r.namespace !== undefined && { namespace: r.namespace }),
    version: r.version,
    ...(r.containers.length > 0 && (r.nativeSidecar ? { initContainers: sidecars } : { containers: sidecars })),
    ...(r.volumes.length > 0 && { volumes: r.volumes.map((v) => v.name) }),
  };
}

function repositories(containers: readonly Container[]): Record<string, string> {
  return Object.fromEntries(containers.map((c) => [c.name, imageRepository(c.image ?? '')]));
}

/**
 * Reads a pod's status annotation. The value comes from the pod, so every field is checked; anything
 * out of shape makes the whole value Invalid rather than half-read.
 */
export function readStatus(pod: Pod): RecordedStatus {
  const annotations = pod.metadata?.annotations;
  const text = annotations !== undefined && Object.hasOwn(annotations, Keys.status) ? annotations[Keys.status] : undefined;
  if (typeof text !== 'string') return { format: StatusFormat.None };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { format: StatusFormat.Invalid };
  }
  if (!isObject(value) || !isStringList(value['templates'])) return { format: StatusFormat.Invalid };
  const templates = value['templates'];
  if (!Object.hasOwn(value, 'injected')) return { format: StatusFormat.Unversioned, templates };
  const injected = value['injected'];
  if (!Array.isArray(injected) || !injected.every(isRecord)) return { format: StatusFormat.Invalid };
  const revision = value['revision'];
  if (revision !== undefined && typeof revision !== 'string') return { format: StatusFormat.Invalid };
  return { format: StatusFormat.Versioned, status: { templates, injected, ...(revision !== undefined && { revision }) } };
}

function isRecord(v: unknown): v is TemplateRecord {
  if (!isObject(v) || typeof v['template'] !== 'string' || typeof v['version'] !== 'string') return false;
  return (
    optional(v['namespace'], (n) => typeof n === 'string') &&
    optional(v['containers'], isStringMap) &&
    optional(v['initContainers'], isStringMap) &&
    optional(v['volumes'], isStringList)
  );
}

function optional(v: unknown, check: (v: unknown) => boolean): boolean {
  return v === undefined || check(v);
}

function isStringList(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((s) => typeof s === 'string');
}

function isStringMap(v: unknown): v is Record<string, string> {
  return isObject(v) && Object.values(v).every((s) => typeof s === 'string');
}
