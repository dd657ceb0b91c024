import { isObject, type JsonObject } from '../kube/types.js';
import { applyJsonPatch, pointerOf, underPath, type Operation } from '../patch/apply.js';
import type { TemplateSet } from '../templates/load.js';
import { getIn, podSites, type PodSite } from '../workload/workload.js';
import { stringifyKubectl } from '../yaml/kubectl.js';
import { admitPod, type Cluster } from './admit.js';
import { processIO, readInputs, type InputOptions, type IO } from './args.js';

/** What injecting one input document gave. */
interface InjectedDocument {
  readonly before: JsonObject;
  readonly after: JsonObject;
  /** JSON patch from `before` to `after`, paths relative to the document. */
  readonly patch: Operation[];
  readonly warnings: readonly string[];
  /** Denials (unknown template, conflict, refused override, the validator's): the document would not be admitted. */
  readonly errors: readonly string[];
}

/** `inject`'s flags, as the command line gave them. */
export interface InjectOptions extends InputOptions {
  readonly output: 'yaml' | 'json';
  /** `--patch`: print the JSON patch instead of the injected manifests. */
  readonly patch: boolean;
}

/**
 * `sidecar-injector inject -f FILE|-`: prints the input with the sidecars injected as admission
 * would inject them, like `istioctl kube-inject`: only the pods the shipped webhook configurations
 * send to the injector. Exit 1 when any pod would be denied, by the mutating or the validating handler.
 */
export async function injectCommand(values: InjectOptions, io: IO = processIO): Promise<number> {
  const format = values.output;
  const { docs, set, cluster } = await readInputs('inject', values, io.stdin, io.stderr);
  const results = docs.map((d) => injectDocument(d, set, values.namespace ?? 'default', cluster));
  for (const w of results.flatMap((r) => r.warnings)) io.stderr(`warning: ${w}\n`);
  const errors = results.flatMap((r) => r.errors);
  if (errors.length > 0) {
    for (const e of errors) io.stderr(`error: ${e}\n`);
    return 1;
  }
  io.stdout(
    values.patch === true
      ? printPatches(results)
      : printDocuments(
          results.map((r) => r.after),
          format,
        ),
  );
  return 0;
}

/**
 * Injects every pod of one document as the cluster would admit it (admitPod): the mutating
 * webhook's own patch, moved to where the pod sits in the document, applied as the apiserver
 * applies it. The pod template keeps its own name fields, which the webhook never touches.
 */
function injectDocument(doc: JsonObject, set: TemplateSet, namespace: string, cluster: Cluster): InjectedDocument {
  let after = doc;
  const patch: Operation[] = [];
  const warnings: string[] = [];
  const errors: string[] = [];
  for (const site of podSites(doc, namespace)) {
    const admission = admitPod(site, set, cluster);
    warnings.push(...admission.warnings.map((w) => `${site.title}: ${w}`));
    if (admission.verdict === 'rejected') errors.push(`${site.title}: ${admission.why.at(-1) ?? admission.reason}`);
    if (admission.verdict !== 'injected' || admission.patch.length === 0) continue;
    const ops = onDocument(doc, site, admission.patch);
    after = applyJsonPatch(after, ops);
    patch.push(...ops);
  }
  return { before: doc, after, patch, warnings, errors };
}

/**
 * The webhook's patch of a site's pod, on the document. The pod a controller makes always has
 * metadata (its name), which a pod template may lack: the patch then adds into metadata, so the
 * document gets an empty one first.
 */
function onDocument(doc: JsonObject, site: PodSite, ops: readonly Operation[]): Operation[] {
  const moved = underPath(ops, site.path);
  const template = getIn(doc, site.path);
  if (!isObject(template) || isObject(template['metadata']) || !isObject(site.pod.metadata)) return moved;
  return [{ op: 'add', path: `${pointerOf(site.path)}/metadata`, value: {} }, ...moved];
}

/**
 * YAML documents separated by `---`, or JSON: one object, or a v1 List of several. YAML is written
 * for kubectl's YAML 1.1 reading: a string such as `no`, `on` or `0400` is quoted, so the output
 * means what the input meant.
 */
export function printDocuments(docs: readonly JsonObject[], format: 'yaml' | 'json'): string {
  if (format === 'json') {
    const value = docs.length === 1 ? docs[0] : { apiVersion: 'v1', kind: 'List', items: docs };
    return `${JSON.stringify(value, null, 2)}\n`;
  }
  return stringifyKubectl(docs);
}

// One document: the patch itself, as /mutate would send it for a Pod. Several: one entry each.
function printPatches(results: readonly InjectedDocument[]): string {
  if (results.length === 1) return `${JSON.stringify(results[0]!.patch, null, 2)}\n`;
  const entries = results.map((r) => {
    const meta = (r.before['metadata'] ?? {}) as { name?: string; generateName?: string; namespace?: string };
    return {
      kind: r.before['kind'],
      ...(meta.namespace !== undefined && { namespace: meta.namespace }),
      name: meta.name ?? meta.generateName ?? '',
      patch: r.patch,
    };
  });
  return `${JSON.stringify(entries, null, 2)}\n`;
}
