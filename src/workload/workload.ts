import { LineCounter } from 'yaml';
import { podObject } from '../admission/pod.js';
import { ErrorCodes, InjectorError } from '../errors.js';
import { isObject, type JsonObject, type Pod } from '../kube/types.js';
import { errorPosition, parseKubectl } from '../yaml/kubectl.js';

/**
 * The objects a user keeps in a repository, read the way `kubectl apply -f` reads them: one or many
 * YAML (or JSON) documents, `List`s of items, and for each object the pod inside it, if any: a Pod
 * itself, or the pod template of a Deployment, StatefulSet, DaemonSet, ReplicaSet,
 * ReplicationController, Job or CronJob.
 */

/** Where the pod template sits in each workload kind. */
export const PodTemplatePaths: Readonly<Record<string, readonly string[]>> = Object.freeze({
  Pod: [],
  Deployment: ['spec', 'template'],
  StatefulSet: ['spec', 'template'],
  DaemonSet: ['spec', 'template'],
  ReplicaSet: ['spec', 'template'],
  ReplicationController: ['spec', 'template'],
  Job: ['spec', 'template'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template'],
});

/** One pod found in the input: which object holds it, where, and what admission would know about it. */
export interface PodSite {
  /** `Deployment shop/web`, for messages. */
  readonly title: string;
  readonly kind: string;
  /** Path from the document root to the pod (or pod template), e.g. `items/0/spec/template`. */
  readonly path: readonly (string | number)[];
  /** The pod as admission would see it (a template gets the name fields its controller gives: controllerPodName). */
  readonly pod: Pod;
  readonly namespace: string;
  /** The workload's own labels and annotations, which its pods never get; undefined for a Pod. */
  readonly workloadMetadata?: { readonly labels?: Readonly<Record<string, string>>; readonly annotations?: Readonly<Record<string, string>> };
}

/**
 * Parses one or many YAML or JSON documents with kubectl's meaning (YAML 1.1: `no` is false, `0400`
 * is 256; see src/yaml/kubectl.ts); empty documents are skipped. Throws INPUT_INVALID with the line
 * and column of a syntax error.
 */
export function parseDocuments(text: string, source: string): JsonObject[] {
  const out: JsonObject[] = [];
  const lineCounter = new LineCounter();
  for (const { doc, value } of parseKubectl(text, lineCounter)) {
    const at = errorPosition(doc, lineCounter);
    if (at !== undefined)
      throw new InjectorError('INPUT_INVALID', [source, `YAML at line ${at.line}, column ${at.column}: ${doc.errors[0]!.message.split('\n')[0]}`]);
    if (value === null || value === undefined) continue;
    if (!isObject(value)) throw new InjectorError('INPUT_INVALID', [source, 'every document must be a Kubernetes object (a YAML mapping)']);
    out.push(value);
  }
  return out;
}

/** Finds every pod in a document (recursing into `List` items). `namespace` is used when an object has none. */
export function podSites(doc: JsonObject, namespace: string, path: readonly (string | number)[] = []): PodSite[] {
  const kind = typeof doc['kind'] === 'string' ? doc['kind'] : '';
  if (Array.isArray(doc['items']) && kind.endsWith('List')) {
    return doc['items'].flatMap((item, i) => (isObject(item) ? podSites(item, namespace, [...path, 'items', i]) : []));
  }
  const at = PodTemplatePaths[kind];
  if (at === undefined) return [];
  const meta = isObject(doc['metadata']) ? doc['metadata'] : {};
  const name = objectName(meta);
  const ns = typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : namespace;
  const found = getIn(doc, at);
  if (!isObject(found)) return [];
  const title = `${kind} ${ns}/${name || '(unnamed)'}`;
  const template = checkedPod(found, title);
  const pod = kind === 'Pod' ? template : asControllerPod(template, kind, name, doc);
  const workloadMetadata =
    kind === 'Pod'
      ? undefined
      : { ...(isStringMap(meta['labels']) && { labels: meta['labels'] }), ...(isStringMap(meta['annotations']) && { annotations: meta['annotations'] }) };
  return [{ title, kind, path: [...path, ...at], pod, namespace: ns, ...(workloadMetadata !== undefined && { workloadMetadata }) }];
}

function isStringMap(value: unknown): value is Record<string, string> {
  return isObject(value) && Object.values(value).every((v) => typeof v === 'string');
}

/**
 * The name an object gets when it is created: its `metadata.name`, else its `generateName` and the
 * random suffix the apiserver appends (five characters, names.SimpleNameGenerator), written
 * `<suffix>`. A workload written for `kubectl create` with only generateName (Knative's
 * storage-version-migration Job) still owns its pods.
 */
function objectName(meta: JsonObject): string {
  if (typeof meta['name'] === 'string' && meta['name'] !== '') return meta['name'];
  if (typeof meta['generateName'] === 'string' && meta['generateName'] !== '') return `${meta['generateName']}<suffix>`;
  return '';
}

/** The same shape checks the server makes on request.object, so a malformed pod is a clear error, not a crash. */
function checkedPod(pod: JsonObject, title: string): Pod {
  try {
    return podObject(withoutNulls(pod));
  } catch (err) {
    if (!(err instanceof InjectorError)) throw err;
    const detail = err.message.replace(ErrorCodes.REVIEW_INVALID.message.replace('%s', ''), '').replace('request.object', 'pod');
    throw new InjectorError('INPUT_INVALID', [title, detail], { cause: err });
  }
}

/**
 * The object as the apiserver decodes it: a field written `null` (`volumes: null`, as some charts
 * render) is Go's zero value and absent from the pod a webhook receives (omitempty).
 */
function withoutNulls(value: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === null) continue;
    out[key] = isObject(v) ? withoutNulls(v) : Array.isArray(v) ? v.map((item) => (isObject(item) ? withoutNulls(item) : item)) : v;
  }
  return out;
}

/**
 * How each controller names the pods it creates. kube-controller-manager's GetPodFromTemplate
 * (pkg/controller/controller_utils.go) copies only the template's labels, annotations and finalizers:
 * the template's own metadata.name and generateName never reach the pod. The pod gets
 * `generateName: <owner>-`, and the apiserver appends a random suffix after admission, so a
 * webhook sees only the prefix. Parts the CLI cannot know are written `<hash>`, `<ordinal>`,
 * `<index>`, `<time>` (and `<suffix>` in the owner's own name when it has only generateName):
 * - Deployment: its ReplicaSet is `<deployment>-<pod-template-hash>`, so `<deployment>-<hash>-`;
 * - ReplicaSet, ReplicationController, DaemonSet: `<name>-`;
 * - StatefulSet: the pod has a name, `<statefulset>-<ordinal>` (and generateName `<statefulset>-`);
 * - Job: `<job>-`, for an Indexed Job `<job>-<index>-` (job_controller.go podGenerateNameWithIndex);
 * - CronJob: its Jobs are `<cronjob>-<scheduled time in minutes since the epoch>`, so `<cronjob>-<time>-`.
 */
function controllerPodName(kind: string, owner: string, workload: JsonObject): { readonly name?: string; readonly generateName: string } | undefined {
  if (owner === '') return undefined;
  switch (kind) {
    case 'Deployment':
      return { generateName: `${owner}-<hash>-` };
    case 'StatefulSet':
      return { name: `${owner}-<ordinal>`, generateName: `${owner}-` };
    case 'Job':
      return { generateName: isIndexed(workload['spec']) ? `${owner}-<index>-` : `${owner}-` };
    case 'CronJob':
      return { generateName: `${owner}-<time>-` };
    case 'ReplicaSet':
    case 'ReplicationController':
    case 'DaemonSet':
      return { generateName: `${owner}-` };
    default:
      return undefined;
  }
}

function isIndexed(spec: unknown): boolean {
  return isObject(spec) && spec['completionMode'] === 'Indexed';
}

/** The controller reference a controller puts on its pods (the Job's for a CronJob's pods); `uid` is unknown here. */
function controllerRef(kind: string, owner: string): JsonObject | undefined {
  const ref = (apiVersion: string, refKind: string, name: string): JsonObject => ({
    apiVersion,
    kind: refKind,
    name,
    controller: true,
    blockOwnerDeletion: true,
  });
  if (kind === 'Deployment') return ref('apps/v1', 'ReplicaSet', `${owner}-<hash>`);
  if (kind === 'CronJob') return ref('batch/v1', 'Job', `${owner}-<time>`);
  if (kind === 'Job') return ref('batch/v1', 'Job', owner);
  if (kind === 'ReplicationController') return ref('v1', kind, owner);
  return ['StatefulSet', 'DaemonSet', 'ReplicaSet'].includes(kind) ? ref('apps/v1', kind, owner) : undefined;
}

// The pod as its controller creates it: the template's name fields replaced by the controller's,
// and the controller's reference (so a Job's pod is seen as one, as the handlers see it).
function asControllerPod(template: Pod, kind: string, owner: string, workload: JsonObject): Pod {
  const { name: _name, generateName: _generateName, ownerReferences: _refs, ...meta } = template.metadata ?? {};
  const naming = controllerPodName(kind, owner, workload);
  const ref = owner === '' ? undefined : controllerRef(kind, owner);
  return { ...template, metadata: { ...meta, ...naming, ...(ref !== undefined && { ownerReferences: [ref] }) } };
}

/** Reads the value at a path, or undefined. */
export function getIn(value: unknown, path: readonly (string | number)[]): unknown {
  let cur = value;
  for (const key of path) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string | number, unknown>)[key];
  }
  return cur;
}
