import { InjectorError } from '../errors.js';
import { Options } from '../config/config.js';
import { isObject, MetadataLimits, NO_ITEMS, type JsonObject, type Pod } from '../kube/types.js';
import { describeValue } from './codec.js';

/**
 * What a pod may hold before the injector refuses it: far above any real workload (README, "Limits
 * per review"), low enough that the answer and the work stay small. Kubernetes sets no number of
 * its own; etcd's 1.5 MiB object limit is the only bound, which a pod of tens of thousands of
 * containers meets.
 */
export interface PodLimits {
  /** containers + initContainers + ephemeralContainers. */
  readonly containers: number;
  readonly envPerContainer: number;
  readonly mountsPerContainer: number;
  readonly portsPerContainer: number;
  readonly volumes: number;
}

/** The defaults of the --max-* flags. */
export const DefaultPodLimits: PodLimits = Object.freeze({
  containers: Options.maxContainers.schema.default,
  envPerContainer: Options.maxEnvPerContainer.schema.default,
  mountsPerContainer: Options.maxMountsPerContainer.schema.default,
  portsPerContainer: Options.maxPortsPerContainer.schema.default,
  volumes: Options.maxVolumes.schema.default,
});

/**
 * The pod of a pod CREATE, with the fields the injector reads checked for type and size in one
 * pass: the apiserver always sends a well-typed Pod, so anything else comes from another client
 * and is refused (400) rather than failing inside the injection (500). Metadata over Kubernetes'
 * limits, and lists over `limits`, are refused with a message naming the limit. Linear in the
 * labels, annotations, containers, env vars, mounts and volumes; the rest of the pod is never
 * walked (checkNesting has bounded its depth).
 */
export function podObject(object: unknown, limits: PodLimits = DefaultPodLimits): Pod {
  const pod = object;
  if (!isObject(pod)) throw invalid('request.object must be the Pod being created');
  if (pod['kind'] !== undefined && pod['kind'] !== 'Pod') throw invalid(`request.object has kind ${describeValue(pod['kind'])}, not Pod`);
  if (pod['apiVersion'] !== undefined && pod['apiVersion'] !== 'v1') throw invalid(`request.object has apiVersion ${describeValue(pod['apiVersion'])}, not v1`);
  const meta = optionalObject(pod['metadata'], 'metadata');
  if (meta !== undefined) checkMetadata(meta);
  const spec = optionalObject(pod['spec'], 'spec');
  if (spec !== undefined) checkSpec(spec, limits);
  return pod as Pod;
}

function checkMetadata(meta: JsonObject): void {
  checkLabels(meta['labels']);
  checkAnnotations(meta['annotations']);
  for (const field of ['name', 'generateName', 'namespace'] as const) optionalString(meta[field], 'metadata.', field);
  objectList(meta['ownerReferences'], 'metadata.', 'ownerReferences');
}

function checkLabels(value: unknown): void {
  const labels = optionalObject(value, 'metadata.labels');
  for (const key in labels) {
    const v = labels[key];
    if (typeof v !== 'string') throw invalid(`request.object.metadata.labels must map strings to strings; ${describeValue(key)} maps to ${describeValue(v)}`);
    checkKey(key, 'label');
    if (v.length > MetadataLimits.labelValue) {
      throw overKubernetes(
        `label ${describeValue(key)} has a value of ${v.length} characters; Kubernetes allows at most ${MetadataLimits.labelValue}`,
        'validation.IsValidLabelValue',
      );
    }
  }
}

function checkAnnotations(value: unknown): void {
  const annotations = optionalObject(value, 'metadata.annotations');
  // UTF-16 units first: a unit is at most 3 bytes of UTF-8, so only a map of some 87,000
  // characters or more can be over the limit, and only such a map is measured byte by byte.
  let units = 0;
  for (const key in annotations) {
    const v = annotations[key];
    if (typeof v !== 'string')
      throw invalid(`request.object.metadata.annotations must map strings to strings; ${describeValue(key)} maps to ${describeValue(v)}`);
    checkKey(key, 'annotation');
    units += key.length + v.length;
  }
  if (units * 3 <= MetadataLimits.annotationBytes) return;
  let bytes = 0;
  for (const key in annotations) bytes += utf8Length(key) + utf8Length(annotations[key] as string);
  if (bytes > MetadataLimits.annotationBytes) {
    throw overKubernetes(
      `the annotations take ${bytes} bytes (keys plus values); Kubernetes allows at most ${MetadataLimits.annotationBytes} (256 KiB)`,
      'ValidateAnnotationsSize',
    );
  }
}

/** Bytes of UTF-8, as Go's len() counts a string; short strings in a loop, to spare a native call per key. */
function utf8Length(text: string): number {
  if (text.length > 64) return Buffer.byteLength(text);
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // Two bytes up to U+07FF, three beyond; a surrogate pair (two units) is four.
    if (c > 0x7f) bytes += c <= 0x7ff || (c >= 0xd800 && c <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}

/** Only the lengths of a qualified name; its characters are the apiserver's to judge. */
function checkKey(key: string, what: 'label' | 'annotation'): void {
  if (key.length <= MetadataLimits.keyName) return;
  const slash = key.indexOf('/');
  const name = slash < 0 ? key.length : key.length - slash - 1;
  if (name > MetadataLimits.keyName) {
    throw overKubernetes(
      `${what} key ${describeValue(key)} has a name part of ${name} characters; Kubernetes allows at most ${MetadataLimits.keyName}`,
      'validation.IsQualifiedName',
    );
  }
  if (slash > MetadataLimits.keyPrefix) {
    throw overKubernetes(
      `${what} key ${describeValue(key)} has a prefix of ${slash} characters; Kubernetes allows at most ${MetadataLimits.keyPrefix}`,
      'validation.IsQualifiedName',
    );
  }
}

// The field paths of the messages are built only for a pod that fails a check: a pod of a few
// containers with a dozen env vars each would otherwise build some fifty strings per review.
function checkSpec(spec: JsonObject, limits: PodLimits): void {
  for (const field of ['serviceAccountName', 'serviceAccount'] as const) optionalString(spec[field], 'spec.', field);
  const volumes = namedList(spec['volumes'], 'spec.', 'volumes');
  if (volumes.length > limits.volumes) throw overLimit(`${volumes.length} volumes`, limits.volumes, Options.maxVolumes.flag);
  // An imagePullSecret may come without a name (LocalObjectReference.name is omitempty).
  const secrets = objectList(spec['imagePullSecrets'], 'spec.', 'imagePullSecrets');
  for (let i = 0; i < secrets.length; i++) optionalString(secrets[i]!['name'], `spec.imagePullSecrets[${i}].`, 'name');
  const containers = namedList(spec['containers'], 'spec.', 'containers');
  const initContainers = namedList(spec['initContainers'], 'spec.', 'initContainers');
  const ephemeralContainers = namedList(spec['ephemeralContainers'], 'spec.', 'ephemeralContainers');
  const count = containers.length + initContainers.length + ephemeralContainers.length;
  if (count > limits.containers)
    throw overLimit(`${count} containers (containers, initContainers and ephemeralContainers together)`, limits.containers, Options.maxContainers.flag);
  for (let i = 0; i < containers.length; i++) checkContainer(containers[i]!, 'containers', i, limits);
  for (let i = 0; i < initContainers.length; i++) checkContainer(initContainers[i]!, 'initContainers', i, limits);
  for (let i = 0; i < ephemeralContainers.length; i++) checkContainer(ephemeralContainers[i]!, 'ephemeralContainers', i, limits);
}

function checkContainer(c: JsonObject, list: string, i: number, limits: PodLimits): void {
  const at: Base = { list, i };
  optionalString(c['image'], at, '.image');
  const env = namedList(c['env'], at, '.env');
  if (env.length > limits.envPerContainer)
    throw overLimit(`${env.length} env vars in ${pathOf(at, '')}`, limits.envPerContainer, Options.maxEnvPerContainer.flag);
  for (let j = 0; j < env.length; j++) {
    const value = env[j]!['value'];
    if (value !== undefined && typeof value !== 'string') throw invalid(`request.object.${pathOf(at, `.env[${j}].value`)} must be a string`);
  }
  const mounts = namedList(c['volumeMounts'], at, '.volumeMounts');
  if (mounts.length > limits.mountsPerContainer)
    throw overLimit(`${mounts.length} volumeMounts in ${pathOf(at, '')}`, limits.mountsPerContainer, Options.maxMountsPerContainer.flag);
  for (let j = 0; j < mounts.length; j++) {
    if (typeof mounts[j]!['mountPath'] !== 'string') throw invalid(`request.object.${pathOf(at, `.volumeMounts[${j}].mountPath`)} must be a string`);
  }
  const ports = optionalList(c['ports'], at, '.ports');
  if (ports.length > limits.portsPerContainer)
    throw overLimit(`${ports.length} ports in ${pathOf(at, '')}`, limits.portsPerContainer, Options.maxPortsPerContainer.flag);
}

/** Where a field is, for a message: a path written out, or a container of a list (`spec.<list>[<i>]`). */
type Base = string | { readonly list: string; readonly i: number };

function pathOf(base: Base, field: string): string {
  return typeof base === 'string' ? `${base}${field}` : `spec.${base.list}[${base.i}]${field}`;
}

function optionalObject(value: unknown, field: string): JsonObject | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) throw invalid(`request.object.${field} must be an object`);
  return value;
}

function optionalString(value: unknown, base: Base, field: string): void {
  if (value !== undefined && typeof value !== 'string') throw invalid(`request.object.${pathOf(base, field)} must be a string`);
}

function optionalList(value: unknown, base: Base, field: string): readonly unknown[] {
  if (value === undefined) return NO_ITEMS;
  if (!Array.isArray(value)) throw invalid(`request.object.${pathOf(base, field)} must be a list`);
  return value;
}

function objectList(value: unknown, base: Base, field: string): readonly JsonObject[] {
  const list = optionalList(value, base, field);
  for (let i = 0; i < list.length; i++) {
    if (!isObject(list[i])) throw invalid(`request.object.${pathOf(base, field)}[${i}] must be an object`);
  }
  return list as readonly JsonObject[];
}

function namedList(value: unknown, base: Base, field: string): readonly JsonObject[] {
  const list = optionalList(value, base, field);
  for (let i = 0; i < list.length; i++) {
    const item = list[i];
    if (!isObject(item) || typeof item['name'] !== 'string') throw invalid(`request.object.${pathOf(base, field)}[${i}] must be an object with a name`);
  }
  return list as readonly JsonObject[];
}

function invalid(detail: string): InjectorError {
  return new InjectorError('REVIEW_INVALID', [detail]);
}

function overKubernetes(detail: string, rule: string): InjectorError {
  return new InjectorError('POD_OVER_KUBERNETES_LIMIT', [detail, rule]);
}

function overLimit(what: string, limit: number, flag: string): InjectorError {
  return new InjectorError('POD_OVER_LIMIT', [what, limit, flag]);
}
