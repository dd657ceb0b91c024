import { LineCounter } from 'yaml';
import { podObject } from '../admission/review.js';
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
  /** The pod as admission would see it (a template gets the generateName its controller gives). */
  readonly pod: Pod;
  readonly namespace: string;
  /** Pods of Jobs and CronJobs; for a bare Pod, undefined (its ownerReferences tell). */
  readonly ownedByJob: boolean | undefined;
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
    if (at !== undefined) throw new InjectorError('INPUT_INVALID', [source, `YAML at line ${at.line}, column ${at.column}: ${doc.errors[0]!.message.split('\n')[0]}`]);
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
  const name = typeof meta['name'] === 'string' ? meta['name'] : '';
  const ns = typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : namespace;
  const found = getIn(doc, at);
  if (!isObject(found)) return [];
  const title = `${kind} ${ns}/${name || '(unnamed)'}`;
  const template = checkedPod(found, title);
  const pod = kind === 'Pod' ? template : asControllerPod(template, name);
  const ownedByJob = kind === 'Job' || kind === 'CronJob' ? true : kind === 'Pod' ? undefined : false;
  return [{ title, kind, path: [...path, ...at], pod, namespace: ns, ownedByJob }];
}

/** The same shape checks the server makes on request.object, so a malformed pod is a clear error, not a crash. */
function checkedPod(pod: JsonObject, title: string): Pod {
  try {
    return podObject({ uid: '', object: pod });
  } catch (err) {
    if (!(err instanceof InjectorError)) throw err;
    const detail = err.message.replace(ErrorCodes.REVIEW_INVALID.message.replace('%s', ''), '').replace('request.object', 'pod');
    throw new InjectorError('INPUT_INVALID', [title, detail], { cause: err });
  }
}

// A controller names its pods `<name>-<suffix>` through generateName; placeholders see that prefix.
function asControllerPod(template: Pod, name: string): Pod {
  const meta = template.metadata ?? {};
  if (name === '' || meta.name !== undefined || meta.generateName !== undefined) return template;
  return { ...template, metadata: { ...meta, generateName: `${name}-` } };
}

/** Undoes asControllerPod on an injected pod, so only what the injector added differs from the input. */
export function asTemplate(original: Pod, injected: Pod): Pod {
  const before = original.metadata ?? {};
  const after = injected.metadata;
  if (after === undefined || before.generateName !== undefined || after.generateName === undefined) return injected;
  const { generateName: _dropped, ...meta } = after;
  return { ...injected, metadata: meta };
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

/** Returns a copy of `doc` with the value at `path` replaced; every branch off the path is shared. */
export function setIn<T>(doc: T, path: readonly (string | number)[], value: unknown): T {
  const [head, ...rest] = path;
  if (head === undefined) return value as T;
  if (Array.isArray(doc)) {
    const copy = [...doc];
    copy[head as number] = setIn(copy[head as number], rest, value);
    return copy as T;
  }
  const obj = doc as Record<string, unknown>;
  return { ...obj, [head]: setIn(obj[head], rest, value) } as T;
}
