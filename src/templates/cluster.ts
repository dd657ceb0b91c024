import { formatFault, TemplateSetError, type TemplateFault } from '../errors.js';
import { clip } from '../log.js';
import { Claims } from './conflicts.js';
import { compileTemplateSet, type TemplateSet } from './load.js';
import { renderValues } from './placeholders.js';
import { requiredFaults } from './required.js';
import { deepFreeze, digestOf, type CompiledTemplate, type RenderedTemplate } from './template.js';

/** The SidecarTemplate resource: the CRD in manifests/base/crds/ serves it. */
export const SidecarTemplateResource = { group: 'sidecar-injector.io', version: 'v1alpha1', plural: 'sidecartemplates', kind: 'SidecarTemplate' } as const;

/** A SidecarTemplate object as the API server returns it (only the fields read here). */
export interface TemplateObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata: {
    readonly name?: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly generation?: number;
    readonly resourceVersion?: string;
    readonly creationTimestamp?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec?: unknown;
  readonly status?: TemplateObjectStatus;
}

/** `status` of a SidecarTemplate: whether the injector serves the object's current generation, and why not. */
export interface TemplateObjectStatus {
  readonly observedGeneration?: number;
  readonly conditions?: readonly (LoadedCondition | PolicyCondition)[];
}

/**
 * The `Policy` condition (serve --mode policy and hybrid): whether the object's served version
 * compiles to an admission policy, and if not why (then the webhook injects it in hybrid mode).
 */
export interface PolicyCondition {
  readonly type: 'Policy';
  readonly status: 'True' | 'False';
  readonly reason: 'Compiled' | 'NotCompiled';
  readonly message: string;
  readonly observedGeneration?: number;
  readonly lastTransitionTime: string;
}

/** The `Loaded` condition (metav1.Condition's fields). */
export interface LoadedCondition {
  readonly type: 'Loaded';
  readonly status: 'True' | 'False';
  readonly reason: 'Loaded' | 'Invalid';
  readonly message: string;
  readonly observedGeneration?: number;
  readonly lastTransitionTime: string;
}

/** What checking one object gave: its compiled template, or every fault found in it. */
export type ObjectResult = { readonly ok: true; readonly template: CompiledTemplate } | { readonly ok: false; readonly faults: readonly TemplateFault[] };

/**
 * The most bytes of one object the injector compiles and keeps: its spec, labels and annotations as
 * JSON (without kubectl's last-applied copy). The largest real-world sidecar of
 * test/fixtures/corpus/sidecars is under 8 KB; the CRD's schema refuses most larger objects at write
 * time, this refuses the rest (objects written before the CRD had its bounds). docs/limits-and-security.md.
 */
export const MAX_OBJECT_BYTES = 64 * 1024;
/**
 * What an object costs beside its bytes: a compiled template of one small container holds ~6 KiB
 * of heap, an object of 62 KB ~210 KiB (3.5 times its bytes). Charged per object against the
 * budgets, so many small objects are bounded as surely as a few big ones.
 */
export const OBJECT_OVERHEAD_BYTES = 4096;
/** The most bytes the objects of one namespace hold together (each charged OBJECT_OVERHEAD_BYTES more); past it the newest are not served. */
export const NAMESPACE_BUDGET_BYTES = 4 * 1024 * 1024;
/** The most bytes the objects of every namespace hold together; the injector's namespace's count first. */
export const TOTAL_BUDGET_BYTES = 16 * 1024 * 1024;

/** kubectl's copy of what it applied: never part of a template, nor of its bytes. */
export const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * What the injector keeps of an object as the API sent it, and its size: the fields a template is
 * made of (spec, labels, annotations but kubectl's last-applied copy) and the metadata the store
 * needs; never managedFields. An object over MAX_OBJECT_BYTES keeps its metadata and status alone
 * (no spec), so a 1.5 MB object costs the injector a few hundred bytes (test/kube/tenancy.test.ts).
 */
export function boundedObject(obj: TemplateObject): { readonly object: TemplateObject; readonly bytes: number } {
  const { labels } = obj.metadata;
  const { [LAST_APPLIED]: _applied, ...annotations } = obj.metadata.annotations ?? {};
  const kept = { ...(labels && { labels }), ...(Object.keys(annotations).length > 0 && { annotations }) };
  // Measured by a walk that stops past the limit: a 1.5 MB object costs a look at its first 64 KiB, and no copy.
  const bytes = jsonBytesAtMost({ spec: obj.spec ?? null, ...kept }, MAX_OBJECT_BYTES + 1);
  if (bytes > MAX_OBJECT_BYTES) return { object: metadataOnly(obj), bytes };
  const { metadata, ...base } = metadataOnly(obj);
  return { object: { ...base, metadata: { ...metadata, ...kept }, spec: obj.spec }, bytes };
}

/** What the store keeps of an object it does not compile: its metadata and status, a few hundred bytes. */
export function metadataOnly(obj: TemplateObject): TemplateObject {
  const { name, namespace, uid, generation, resourceVersion, creationTimestamp } = obj.metadata;
  const metadata: TemplateObject['metadata'] = JSON.parse(JSON.stringify({ name, namespace, uid, generation, resourceVersion, creationTimestamp })); // undefined fields left out
  return { ...(obj.apiVersion !== undefined && { apiVersion: obj.apiVersion }), ...(obj.kind !== undefined && { kind: obj.kind }), ...(obj.status !== undefined && { status: obj.status }), metadata };
}

/**
 * The bytes of `value` as JSON (UTF-8, escapes aside), counted until they pass `stop`: the count then
 * is `stop` or more, and the walk ends there. Iterative, so no depth a tenant writes can overflow the stack.
 */
export function jsonBytesAtMost(value: unknown, stop: number): number {
  let bytes = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && bytes < stop) {
    const v = pending.pop();
    if (typeof v === 'string') bytes += Buffer.byteLength(v) + 2;
    else if (Array.isArray(v)) {
      bytes += 2 + Math.max(0, v.length - 1);
      for (const item of v) pending.push(item);
    } else if (typeof v === 'object' && v !== null) {
      const keys = Object.keys(v);
      bytes += 2 + Math.max(0, keys.length - 1);
      for (const k of keys) {
        bytes += Buffer.byteLength(k) + 3;
        pending.push((v as Record<string, unknown>)[k]);
      }
    } else bytes += String(v).length;
  }
  return bytes;
}

/** The fault of an object over MAX_OBJECT_BYTES, found before anything of it is compiled. */
export function tooLarge(obj: TemplateObject): ObjectResult {
  const file = `sidecartemplate ${objectKey(obj)}`;
  return { ok: false, faults: [{ file, ...(obj.metadata.name !== undefined && { template: obj.metadata.name }), path: '', message: `the object's spec, labels and annotations are over the injector's limit of ${MAX_OBJECT_BYTES} bytes as JSON: split it, or move large values into a ConfigMap the sidecar mounts` }] };
}

/** `namespace/name`, the key the store uses. */
export function objectKey(obj: TemplateObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`;
}

/**
 * Checks one object with the loader's own schema and rules, as a file of one document: the same
 * faults `lint` reports, named `sidecartemplate NS/NAME`. Server-set metadata (uid, managedFields)
 * and `status` are not part of a template.
 */
export function compileObject(obj: TemplateObject): ObjectResult {
  const { name, namespace, labels, annotations } = obj.metadata;
  const document = { apiVersion: obj.apiVersion, kind: obj.kind, metadata: { name, ...(labels && { labels }), ...(annotations && { annotations }) }, spec: obj.spec };
  const file = `sidecartemplate ${namespace ?? ''}/${name ?? ''}`;
  try {
    // JSON is YAML: the loader reads it as it reads a file.
    const set = compileTemplateSet([{ file, text: JSON.stringify(document), ...(namespace !== undefined && { namespace }) }], file);
    const template = set.templates.get(name ?? '');
    if (template === undefined) return { ok: false, faults: [{ file, path: '', message: 'the object holds no template' }] };
    return { ok: true, template };
  } catch (err) {
    if (!(err instanceof TemplateSetError)) throw err;
    // A line and column would count in the JSON made here, which nobody wrote: the path says where.
    return { ok: false, faults: keptFaults(file, err.faults.map(({ line: _line, column: _column, ...fault }) => fault)) };
  }
}

/**
 * Checks one object as the store does before it serves it: over MAX_OBJECT_BYTES it is refused
 * before anything of it is compiled (tooLarge), else compiled alone (compileObject). The store and
 * the SidecarTemplate webhook (src/admission/sidecartemplates.ts) both judge an object by this.
 */
export function checkObject(obj: TemplateObject): ObjectResult {
  const { object, bytes } = boundedObject(obj);
  return bytes > MAX_OBJECT_BYTES ? tooLarge(object) : compileObject(object);
}

/** The faults of one object in one line, as lint writes them without the pseudo file name each would repeat: the Loaded condition's words, and the webhook's denial. */
export function faultsLine(faults: readonly TemplateFault[]): string {
  return faults.map((f) => formatFault(f).replace(/^sidecartemplate [^:]*:\s*/, '')).join('; ');
}

/** The most faults of one object kept, logged and said in its status, and the most characters of each one's message. */
const FAULTS_KEPT = 16;
const FAULT_MESSAGE_MAX = 512;

/**
 * The first FAULTS_KEPT faults, each message cut to FAULT_MESSAGE_MAX, and one fault saying how many
 * more (of `total`): what an object's faults hold in every replica, and its `Loaded` message, stay a
 * few KiB however many faults its 64 KiB make (etcd refuses a status over 1.5 MiB). Held by
 * test/tenancy/template-faults.attack.test.ts.
 */
function keptFaults(file: string, faults: readonly TemplateFault[], total = faults.length): TemplateFault[] {
  const kept = faults.slice(0, FAULTS_KEPT).map((f) => ({ ...f, message: clip(f.message, FAULT_MESSAGE_MAX) }));
  if (total > FAULTS_KEPT) kept.push({ file, path: '', message: `and ${total - FAULTS_KEPT} more faults not shown (the injector keeps the first ${FAULTS_KEPT} of an object)` });
  return kept;
}

/** The `Loaded` condition for a result, observing `generation`. */
export function loadedCondition(result: ObjectResult, generation: number | undefined, now: Date): LoadedCondition {
  const at = now.toISOString().replace(/\.\d+Z$/, 'Z');
  const observed = generation === undefined ? {} : { observedGeneration: generation };
  if (result.ok) return { type: 'Loaded', status: 'True', reason: 'Loaded', message: 'served by the injector', ...observed, lastTransitionTime: at };
  return { type: 'Loaded', status: 'False', reason: 'Invalid', message: `not served (the last valid version, if any, still is): ${faultsLine(result.faults)}`, ...observed, lastTransitionTime: at };
}

/** True when the object's status already says what `condition` says (the time aside), so no write is needed. */
export function statusSays(obj: TemplateObject, condition: LoadedCondition | PolicyCondition): boolean {
  const found = obj.status?.conditions?.find((c) => c.type === condition.type);
  return found !== undefined && found.status === condition.status && found.reason === condition.reason && found.message === condition.message && found.observedGeneration === condition.observedGeneration;
}

/** One object's candidates for the set: its current version, then the last valid version served, when they differ. */
export interface ObjectCandidates {
  /** `namespace/name`. */
  readonly key: string;
  /** The object's creationTimestamp: of two conflicting default templates, the older object wins. */
  readonly created: string;
  readonly candidates: readonly CompiledTemplate[];
  /** What the first candidate weighs against its namespace's and the total budget: its bytes (boundedObject) and OBJECT_OVERHEAD_BYTES; 0 when unknown. */
  readonly bytes?: number;
  /** What the later candidate (the version served before) weighs; `bytes` when unknown. */
  readonly servedBytes?: number;
  /**
   * The object's status says its current generation is served (servedAsIs): such objects are
   * charged against the budgets before every new or changed one, so a team's new or grown object
   * never takes another's served object away, and every replica, reading the same statuses,
   * decides the same.
   */
  readonly incumbent?: boolean;
}

/** True when the object's status says the injector serves its current generation (Loaded=True, observed at that generation). */
export function servedAsIs(obj: TemplateObject): boolean {
  const loaded = obj.status?.conditions?.find((c) => c.type === 'Loaded');
  return loaded?.status === 'True' && obj.metadata.generation !== undefined && loaded.observedGeneration === obj.metadata.generation;
}

/** The set, the version served for each object, and the objects refused because their defaults conflict. */
export interface ClusterSet {
  readonly set: TemplateSet;
  readonly served: ReadonlyMap<string, CompiledTemplate>;
  /** Objects whose current version is refused, with its conflicts (the last valid version may be served instead). */
  readonly refused: ReadonlyMap<string, readonly TemplateFault[]>;
}

/**
 * The set every pod is judged against. Templates in `home` (the injector's namespace), over the
 * directory's `base` when both sources are used, are cluster-wide; a namespace's own templates are
 * seen by its pods alone, shadow a cluster-wide one of the same name there, and when any is
 * `default: true` they replace the cluster defaults for its pods.
 *
 * Two default templates of one scope that conflict (a container name, a port) would deny every pod
 * there that names none; each object is checked alone, so that is found here. Objects are taken
 * oldest first (creationTimestamp, then key: the same order on every replica): a default that
 * conflicts with the defaults already taken falls back to its last valid version, else is not
 * served, and its status says why. Computed once per change; a namespace without templates of its
 * own sees the cluster-wide set object itself.
 */
export function clusterSet(objects: readonly ObjectCandidates[], home: string, base?: TemplateSet): ClusterSet {
  const served = new Map<string, CompiledTemplate>();
  const refused = new Map<string, readonly TemplateFault[]>();
  // The directory's defaults come first, but not one a cluster-wide object shadows by name (default or not).
  const shadowed = new Set(objects.flatMap((o) => (o.candidates[0]?.namespace === home ? [o.candidates[0].name] : [])));
  const scopes = new Map<string, DefaultsScope>();
  const scopeOf = (namespace: string): DefaultsScope => {
    const found = scopes.get(namespace);
    if (found !== undefined) return found;
    const scope = new DefaultsScope(namespace === home ? 'cluster-wide' : `of namespace ${namespace}`);
    if (namespace === home) for (const d of base?.defaults ?? []) if (!shadowed.has(d.name)) scope.take(d);
    scopes.set(namespace, scope);
    return scope;
  };
  scopeOf(home);
  const ordered = objects.map((o) => ({ ...o, namespace: o.candidates[0]?.namespace ?? '' })).sort(budgetOrder(home));
  const budget = new Budget();
  const wideRequired = requiredNames(objects, home, base);
  for (const { key, namespace, candidates, bytes, servedBytes } of ordered) {
    const scope = scopeOf(namespace);
    const faults = candidates.map((t) => [...requiredFaults(t, home, wideRequired), ...(t.isDefault ? scope.conflicts(t) : [])]);
    // The first candidate without faults that fits the budgets: a version over them falls back to the one served before.
    const chosen = candidates.findIndex((t, i) => {
      if (faults[i]!.length > 0) return false;
      const over = budget.charge(t, (i === 0 ? bytes : (servedBytes ?? bytes)) ?? 0);
      if (over !== undefined) faults[i] = [over];
      return over === undefined;
    });
    if (chosen !== 0 && candidates.length > 0) refused.set(key, faults[0] ?? []);
    const template = candidates[chosen];
    if (template === undefined) continue;
    served.set(key, template);
    if (template.isDefault) scope.take(template);
  }
  return { set: setOf(served, home, base), served, refused };
}

/**
 * The order objects are charged against the budgets in, the same on every replica: the injector's
 * namespace first (the platform's templates never yield to a tenant's bytes), then the objects
 * served as they are (incumbent), then the oldest first.
 */
export function budgetOrder(home: string): (a: BudgetedObject, b: BudgetedObject) => number {
  const rank = (o: BudgetedObject): number => (o.namespace === home ? 0 : 1) * 2 + (o.incumbent === true ? 0 : 1);
  return (a, b) => rank(a) - rank(b) || a.created.localeCompare(b.created) || a.key.localeCompare(b.key);
}

/** What budgetOrder reads of an object. */
export interface BudgetedObject {
  readonly key: string;
  readonly namespace: string;
  readonly created: string;
  readonly incumbent?: boolean;
}

/** The names of the required cluster-wide templates: the directory's, and those of the objects in `home` (any version of them). */
function requiredNames(objects: readonly ObjectCandidates[], home: string, base?: TemplateSet): Set<string> {
  const wide = objects.flatMap((o) => o.candidates).filter((t) => t.namespace === home);
  return new Set([...(base?.required ?? []), ...wide.filter((t) => t.required !== undefined)].map((t) => t.name));
}

/** Who an object charged against the budgets belongs to, for the fault that refuses it. */
export interface BudgetOwner {
  readonly file: string;
  readonly name: string;
  readonly namespace?: string;
}

/**
 * The bytes objects hold, per namespace and in total: an object that would take either past its
 * budget is refused, so what a team's objects cost the injector is at most NAMESPACE_BUDGET_BYTES,
 * and all of them TOTAL_BUDGET_BYTES. clusterSet charges the versions it serves; the store charges
 * the objects it keeps and compiles (keptObjects), so memory is bounded by bytes, not only by the
 * count of objects (docs/limits-and-security.md, Tenant bounds).
 */
export class Budget {
  readonly #namespaces = new Map<string, number>();
  #total = 0;

  /** Counts `bytes` of an object of `owner`, or says why they do not fit (and counts nothing). */
  charge(owner: BudgetOwner, bytes: number): TemplateFault | undefined {
    const namespace = owner.namespace ?? '';
    const used = this.#namespaces.get(namespace) ?? 0;
    const fault = (message: string): TemplateFault => ({ file: owner.file, template: owner.name, path: '', message });
    if (used + bytes > NAMESPACE_BUDGET_BYTES) return fault(`namespace ${namespace}'s objects ahead of this one (those served as they are, then the older) already hold ${used} of the ${NAMESPACE_BUDGET_BYTES} bytes the injector keeps per namespace, and this one is ${bytes}: delete templates nobody names`);
    if (this.#total + bytes > TOTAL_BUDGET_BYTES) return fault(`the objects of all namespaces ahead of this one (the injector's namespace, those served as they are, then the older) already hold ${this.#total} of the ${TOTAL_BUDGET_BYTES} bytes the injector keeps, and this one is ${bytes}: ask the platform team`);
    this.add(namespace, bytes);
    return undefined;
  }

  /** Counts `bytes` whether they fit or not (negative: gives them back). */
  add(namespace: string, bytes: number): void {
    this.#namespaces.set(namespace, (this.#namespaces.get(namespace) ?? 0) + bytes);
    this.#total += bytes;
  }
}

/** What keptObjects reads of an object: its place in budgetOrder and its bytes with OBJECT_OVERHEAD_BYTES. */
export interface KeptCandidate extends BudgetedObject {
  readonly name: string;
  readonly bytes: number;
}

/**
 * Which objects the store keeps (holds the spec of, compiles and may serve): in budgetOrder, each
 * that fits the budgets beside those taken before it. The result maps each key to undefined (kept)
 * or the fault that refuses it; every replica, reading the same objects and statuses, decides the
 * same (test/kube/budgets.test.ts, "two replicas").
 */
export function keptObjects(objects: readonly KeptCandidate[], home: string): Map<string, TemplateFault | undefined> {
  const budget = new Budget();
  const kept = new Map<string, TemplateFault | undefined>();
  for (const o of [...objects].sort(budgetOrder(home))) kept.set(o.key, budget.charge({ file: `sidecartemplate ${o.key}`, name: o.name, namespace: o.namespace }, o.bytes));
  return kept;
}

/**
 * The default templates taken in one scope (cluster-wide, or one namespace) and their claims in one
 * map, so checking a default is linear in its own size (test/templates/cluster.test.ts, "2000
 * defaults"). A rule on what a scope may take belongs here, beside `conflicts`.
 */
class DefaultsScope {
  readonly #claims = new Claims();
  readonly #taken = new Map<string, CompiledTemplate>();
  constructor(readonly name: string) {}

  /** How `t`, a default template, conflicts with the defaults taken in this scope. */
  conflicts(t: CompiledTemplate): TemplateFault[] {
    if (this.#taken.size === 0) return [];
    const clashes = this.#claims.check(renderedDefault(t));
    // One fault per claim, at most FAULTS_KEPT of them said (keptFaults), however many ports clash.
    return keptFaults(
      t.file,
      clashes.slice(0, FAULTS_KEPT + 1).map((c) => ({ file: t.file, template: t.name, path: c.path, message: `${c.message}: both are default templates ${this.name}, so every pod there that names none would be denied; ${this.#winner(c.with)} is served` })),
      clashes.length,
    );
  }

  take(t: CompiledTemplate): void {
    this.#taken.set(t.name, t);
    this.#claims.add(renderedDefault(t));
  }

  #winner(name: string): string {
    return this.#taken.get(name)?.namespace === undefined ? `the directory's template "${name}"` : `the older object "${name}"`;
  }
}

/**
 * A default template rendered for a pod that names none, once per compiled template: a rebuild
 * after one object changed renders that object alone (the others' compiled templates are the same
 * objects). Keyed weakly, so a version no longer served takes its rendering with it.
 */
const renderedDefaults = new WeakMap<CompiledTemplate, RenderedTemplate>();
function renderedDefault(t: CompiledTemplate): RenderedTemplate {
  const found = renderedDefaults.get(t);
  if (found !== undefined) return found;
  // Kept and shared, so frozen as every shared rendering is (a first sighting comes unfrozen).
  const rendered = deepFreeze(t.render(renderValues({ metadata: {}, spec: { containers: [] } }, 'default')));
  renderedDefaults.set(t, rendered);
  return rendered;
}

function setOf(served: ReadonlyMap<string, CompiledTemplate>, home: string, base?: TemplateSet): TemplateSet {
  const byNamespace = new Map<string, CompiledTemplate[]>();
  for (const t of served.values()) {
    const ns = t.namespace ?? '';
    const own = byNamespace.get(ns);
    if (own === undefined) byNamespace.set(ns, [t]);
    else own.push(t);
  }
  const wide = new Map(base?.templates ?? []);
  for (const t of byNamespace.get(home) ?? []) wide.set(t.name, t);
  const cluster = makeSet(wide, undefined, `sidecartemplates in ${home}${base === undefined ? '' : ` and ${base.source}`}`);
  const namespaces = new Map<string, TemplateSet>();
  for (const [ns, own] of byNamespace) {
    if (ns === home) continue;
    const templates = new Map(wide);
    for (const t of own) templates.set(t.name, t);
    const defaults = own.some((t) => t.isDefault) ? own : undefined;
    namespaces.set(ns, makeSet(templates, defaults, `sidecartemplates in ${ns} over ${cluster.source}`));
  }
  // The whole set's digest covers every namespace: a team's edit is a new set (history, metrics).
  const digest = digestOf([cluster.digest, ...[...namespaces].map(([ns, s]) => [ns, s.digest])]);
  return Object.freeze({ ...cluster, digest, ...(namespaces.size > 0 && { namespaces }) });
}

function makeSet(templates: ReadonlyMap<string, CompiledTemplate>, defaultsFrom: readonly CompiledTemplate[] | undefined, source: string): TemplateSet {
  const sorted = [...templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  const defaults = (defaultsFrom ?? sorted).filter((t) => t.isDefault).sort((a, b) => a.name.localeCompare(b.name));
  // A namespace's object is never required nor shadows a required one (requiredFaults): these are the cluster-wide ones.
  const required = sorted.filter((t) => t.required !== undefined);
  return Object.freeze({
    templates,
    defaults: Object.freeze(defaults),
    digest: digestOf(sorted.map((t) => [t.namespace ?? '', t.name, t.version])),
    source,
    ...(required.length > 0 && { required: Object.freeze(required) }),
  });
}
