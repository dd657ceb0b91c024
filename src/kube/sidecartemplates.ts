import { Watch, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { formatFault } from '../errors.js';
import type { Logger } from '../log.js';
import type { TemplateFault } from '../errors.js';
import {
  boundedObject,
  Budget,
  clusterSet,
  keptObjects,
  metadataOnly,
  compileObject,
  loadedCondition,
  MAX_OBJECT_BYTES,
  OBJECT_OVERHEAD_BYTES,
  objectKey,
  tooLarge,
  SidecarTemplateResource,
  servedAsIs,
  type ObjectCandidates,
  statusSays,
  type ObjectResult,
  type TemplateObject,
  type TemplateObjectStatus,
  type PolicyCondition,
} from '../templates/cluster.js';
import { SetHistory } from '../templates/history.js';
import type { TemplateSet } from '../templates/load.js';
import type { CompiledTemplate } from '../templates/template.js';
import { HISTORY_WINDOW_MS, type ReloadResult, type TemplateStore } from '../templates/watch.js';
import { apiStatus, type KubeClients } from './client.js';

const { group, version, plural } = SidecarTemplateResource;

/** A status write that meets 409 Conflict is tried again this many times, after 100, 200, 400 ... ms. */
const STATUS_RETRIES = 5;
const STATUS_BACKOFF_MS = 100;
/** Status writes in flight at once. */
const STATUS_WRITES_AT_ONCE = 4;

export interface ClusterTemplateStoreOptions {
  readonly logger: Logger;
  /** The directory's set when both sources are used: cluster-wide, shadowed by the objects in the injector's namespace. */
  readonly base?: () => TemplateSet;
  readonly historyWindowMs?: number;
  /** Events come in bursts (a list, `kubectl apply -f dir/`): wait this long for quiet before rebuilding. */
  readonly debounceMs?: number;
  /** Wait before restarting the watch after the API failed it (doubled up to 30 s). */
  readonly retryMs?: number;
  readonly onReload?: (result: ReloadResult) => void;
  /** After each rebuild: how many objects are not served as they are now (invalid, or a refused default). */
  readonly onNotServed?: (count: number) => void;
  /** serve --mode policy and hybrid: the `Policy` condition written beside `Loaded` for a valid object (whether it compiles, and why not). */
  readonly policyCondition?: (template: CompiledTemplate, generation: number | undefined, now: Date) => PolicyCondition;
}

/** The SidecarTemplate objects of the cluster as a template store. */
export interface ClusterTemplateStore extends TemplateStore {
  /** True once the first full list is in the set: readiness waits for it. */
  synced(): boolean;
  /** Resolves when the first full list is in the set. */
  readonly firstList: Promise<void>;
  /** Rebuilds the set now (the directory's set changed). */
  refresh(): void;
}

/** What is known of one object: what is kept of it, its size, the result for its generation, and the version served for it. */
interface Entry {
  /** The bounded copy (boundedObject): never managedFields, no spec when over MAX_OBJECT_BYTES or not held. */
  object: TemplateObject;
  readonly generation: string;
  readonly bytes: number;
  /** Undefined while its compile waits in the queue. */
  result?: ObjectResult;
  /** The version last served: still served while a newer one is invalid, its default conflicts, or it is over a budget. */
  served?: CompiledTemplate | undefined;
  /** The bytes of the version served (as `bytes`). */
  servedBytes?: number;
  /** The condition last written for this generation of the object: each is tried once (a failure is logged, not retried until the spec changes). */
  written?: string;
  /** Its spec is kept (and compiled), charged against the store's budgets; false: metadata only (over MAX_OBJECT_BYTES, or past a budget). */
  held: boolean;
  /** Reading its spec again failed: not tried again before its next event. */
  unread?: boolean;
}

/** Objects per page of the list: what one list answer holds at once is at most this many objects, not the cluster's. */
const LIST_PAGE = 10;

/**
 * Watches SidecarTemplate objects in every namespace (a list in pages, then a watch from the
 * list's resourceVersion with client-node's Watch; a 410 Gone lists again) and serves them as one
 * template set: each object kept as a bounded copy (boundedObject: an object over MAX_OBJECT_BYTES
 * keeps its metadata alone and is refused in its status before anything of it is compiled), and
 * only within the budgets (keepWithinBudgets: an object past its namespace's or the total budget
 * keeps its metadata alone, is refused in its status and is never compiled),
 * compiled once per generation, one object per turn of the event loop, taking namespaces in turn,
 * so a review waits for one compile at most and a team's churn delays only its own objects; an
 * invalid one reported in its status and not served, its last valid version served in its place; a
 * deleted object is removed. Until the first list the set is empty and `synced()` false; when the
 * API is unreachable the set stays as it was and the watch is restarted with a backoff.
 */
export function openClusterTemplateStore(kube: KubeClients, options: ClusterTemplateStoreOptions): ClusterTemplateStore {
  const { logger } = options;
  const home = kube.namespace;
  const path = `/apis/${group}/${version}/${plural}`;
  const watcher = new Watch(kube.config);
  const entries = new Map<string, Entry>();
  /** Keys waiting to be compiled, by namespace; the namespace first in the map goes next, then to the back. */
  const queue = new Map<string, Set<string>>();
  let draining = false;
  let history: SetHistory | undefined;
  /** The bytes of the objects whose spec is kept, with OBJECT_OVERHEAD_BYTES each: what the store holds is bounded by the budgets. */
  const held = new Budget();
  /** The last rebuild's keptObjects: which objects the budgets take, the same on every replica. */
  let plan: ReadonlyMap<string, TemplateFault | undefined> = new Map();
  /** Objects whose spec is being read again (the budgets take them now, their spec was not kept). */
  const fetching = new Set<string>();
  let writing = 0;
  const waiting: (() => void)[] = [];
  const empty: TemplateSet = Object.freeze({ templates: new Map(), defaults: [], digest: 'none', source: `sidecartemplates in ${home}` });
  let closed = false;
  let listed = false;
  let resourceVersion = '';
  let request: AbortController | undefined;
  let debounce: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let backoff = options.retryMs ?? 1000;
  let resolveFirst!: () => void;
  const firstList = new Promise<void>((resolve) => (resolveFirst = resolve));

  const rebuild = (): void => {
    debounce = undefined;
    // Before the first set, every listed object is compiled first (readiness means all of them are in);
    // after it, an object still queued is served as it was until its compile.
    if (closed || !listed || (history === undefined && (queue.size > 0 || fetching.size > 0))) return;
    keepWithinBudgets();
    const objects = [...entries].map(([key, e]) => ({
      key,
      created: e.object.metadata.creationTimestamp ?? '',
      candidates: candidatesOf(e),
      bytes: (e.result?.ok === true ? e.bytes : (e.servedBytes ?? e.bytes)) + OBJECT_OVERHEAD_BYTES,
      servedBytes: (e.servedBytes ?? e.bytes) + OBJECT_OVERHEAD_BYTES,
      incumbent: servedAsIs(e.object),
    }));
    const { set: next, served, refused } = clusterSet(objects, home, options.base?.());
    for (const [key, e] of entries) {
      e.served = served.get(key);
      if (e.served === undefined) delete e.servedBytes;
      else if (e.result?.ok === true && e.served === e.result.template) e.servedBytes = e.bytes;
      const conflict = refused.get(key);
      const result = e.result;
      if (result === undefined) continue;
      void writeStatus(e, conflict === undefined || !result.ok ? result : { ok: false, faults: conflict });
    }
    options.onNotServed?.([...entries.values()].filter((e) => e.result !== undefined && (!e.result.ok || e.served !== e.result.template)).length);
    const time = new Date();
    if (history === undefined) {
      history = new SetHistory(next, { windowMs: options.historyWindowMs ?? HISTORY_WINDOW_MS });
      logger.info({ source: next.source, templates: [...served.keys()], refused: [...refused.keys()], digest: next.digest }, 'sidecartemplates listed');
      resolveFirst();
    } else if (next.digest !== history.current().digest) {
      history.replace(next);
      logger.info({ source: next.source, templates: [...served.keys()], refused: [...refused.keys()], digest: next.digest }, 'templates reloaded');
    } else return;
    options.onReload?.({ ok: true, digest: next.digest, time, serving: next.digest, faults: [] });
  };

  /**
   * A rebuild `debounceMs` after the first event since the last one: later events join it and do
   * not push it back, so a team that changes an object without pause delays others' changes by one
   * debounce, never starves them.
   */
  const schedule = (): void => {
    if (closed || !listed || debounce !== undefined) return; // the first list's end rebuilds once it is in
    debounce = setTimeout(rebuild, options.debounceMs ?? 50);
    debounce.unref();
  };

  /**
   * Compiles the next queued object, then yields (setImmediate) before the next: a review waits at
   * most one object's compile (MAX_OBJECT_BYTES bounds it). Namespaces take turns, so a namespace
   * with a thousand changed objects delays another's one change by one compile, not a thousand.
   */
  const drain = (): void => {
    if (closed) return;
    const [namespace, keys] = queue.entries().next().value ?? [];
    if (namespace === undefined || keys === undefined) {
      draining = false;
      return schedule();
    }
    const [key] = keys;
    keys.delete(key!);
    queue.delete(namespace);
    if (keys.size > 0) queue.set(namespace, keys);
    const e = entries.get(key!);
    if (e !== undefined && e.result === undefined) compile(key!, e);
    setImmediate(drain);
  };

  const compile = (key: string, e: Entry): void => {
    const result = e.bytes > MAX_OBJECT_BYTES ? tooLarge(e.object) : compileObject(e.object);
    e.result = result;
    if (!result.ok)
      options.onReload?.({
        ok: false,
        digest: e.generation,
        time: new Date(),
        serving: history?.current().digest ?? 'none',
        faults: result.faults,
        error: `sidecartemplate ${key} is invalid`,
      });
  };

  const enqueue = (key: string, namespace: string): void => {
    const keys = queue.get(namespace) ?? new Set<string>();
    keys.add(key);
    queue.set(namespace, keys);
    startDrain();
  };

  /** Compiles what is queued; not before the first list is complete, so the budgets choose what is compiled from every object, not from the list's order. */
  const startDrain = (): void => {
    if (draining || !listed) return;
    draining = true;
    setImmediate(drain);
  };

  /**
   * Runs status writes STATUS_WRITES_AT_ONCE at a time: each answer carries the whole object (up to
   * MAX_OBJECT_BYTES of spec), so the statuses of hundreds of refused objects are written and their
   * answers parsed a few at a time, between reviews, not in one burst that holds the event loop
   * for a second (test/kube/tenancy-keep.test.ts).
   */
  const inTurn = async (work: () => Promise<void>): Promise<void> => {
    while (writing >= STATUS_WRITES_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
    writing++;
    try {
      if (!closed) await work();
    } finally {
      writing--;
      waiting.shift()?.();
    }
  };

  const writeStatus = async (e: Entry, result: ObjectResult): Promise<void> => {
    const obj = e.object;
    const now = new Date();
    const condition = loadedCondition(result, obj.metadata.generation, now);
    const policy = result.ok ? options.policyCondition?.(result.template, obj.metadata.generation, now) : undefined;
    const says = `${condition.status}\0${condition.message}${policy === undefined ? '' : `\0${policy.message}`}`;
    if ((statusSays(obj, condition) && (policy === undefined || statusSays(obj, policy))) || e.written === says) return;
    e.written = says;
    if (!result.ok)
      logger.error(
        { template: objectKey(obj), faults: result.faults.map(formatFault), serving: e.served?.version ?? null },
        'sidecartemplate NOT served as it is now; serving its last valid version (serving), or none',
      );
    const conditions = policy === undefined ? [condition] : [condition, policy];
    const status = { ...(obj.metadata.generation !== undefined && { observedGeneration: obj.metadata.generation }), conditions };
    try {
      await inTurn(() => putStatus(obj, status));
    } catch (err) {
      logger.warn({ template: objectKey(obj), err: statusFailure(err) }, 'sidecartemplate status not written');
    }
  };

  /**
   * PUT of the status subresource with the object's resourceVersion (the apiserver takes the status
   * alone from it, so the bounded copy serves). A 409 (another client, such as `kubectl label`,
   * wrote first) is retried against the latest object, with backoff, as long as it is still the
   * generation judged: a new generation gets its own write, and a status another replica wrote
   * meanwhile for this generation stands (test/kube/sidecartemplates.test.ts, "409").
   */
  const putStatus = async (obj: TemplateObject, status: TemplateObjectStatus): Promise<void> => {
    const namespace = obj.metadata.namespace ?? '';
    const name = obj.metadata.name ?? '';
    let resourceVersion = obj.metadata.resourceVersion;
    for (let attempt = 0; ; attempt++) {
      try {
        const metadata = { ...obj.metadata, ...(resourceVersion !== undefined && { resourceVersion }) };
        await kube.custom.replaceNamespacedCustomObjectStatus({
          group,
          version,
          plural,
          namespace,
          name,
          body: { apiVersion: `${group}/${version}`, kind: SidecarTemplateResource.kind, metadata, status },
        });
        return;
      } catch (err) {
        if (apiStatus(err) !== 409 || attempt >= STATUS_RETRIES || closed) throw err;
      }
      await new Promise((r) => setTimeout(r, STATUS_BACKOFF_MS * 2 ** attempt).unref());
      const latest = (await kube.custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as TemplateObject;
      if (latest.metadata.generation !== obj.metadata.generation || latest.metadata.uid !== obj.metadata.uid) return;
      if (latest.status?.observedGeneration === obj.metadata.generation) return;
      resourceVersion = latest.metadata.resourceVersion;
    }
  };

  const upsert = (raw: TemplateObject): void => {
    const key = objectKey(raw);
    const { object, bytes } = boundedObject(raw);
    const namespace = object.metadata.namespace ?? '';
    // generation counts changes of the spec only (the status subresource): a status write is no change.
    const generation = `${object.metadata.uid ?? ''}/${object.metadata.generation ?? object.metadata.resourceVersion ?? ''}`;
    const known = entries.get(key);
    const same = known?.generation === generation;
    if (known?.held === true) held.add(namespace, -(known.bytes + OBJECT_OVERHEAD_BYTES));
    const keep = keepDecision(key, object, bytes, same ? known : undefined);
    // What was written for this generation stays known: an event of our own status write, or of
    // another replica's that judged differently, then brings no second write (no ping-pong).
    // The result of this generation stands while whether it is kept does not change.
    const carried = same && known.held === keep.held ? known.result : undefined;
    const result = carried ?? (keep.fault === undefined ? undefined : { ok: false as const, faults: [keep.fault] });
    const entry: Entry = {
      object: keep.held || bytes > MAX_OBJECT_BYTES ? object : metadataOnly(object),
      generation,
      bytes,
      held: keep.held,
      ...(result !== undefined && { result }),
      ...(known?.served !== undefined && { served: known.served }),
      ...(known?.servedBytes !== undefined && { servedBytes: known.servedBytes }),
      ...(same && known.written !== undefined && { written: known.written }),
    };
    entries.set(key, entry);
    if (entry.result === undefined) enqueue(key, namespace);
    else schedule();
  };

  /**
   * Whether the store keeps an arriving object's spec. Its current generation, kept before, stays
   * kept; one the last rebuild's plan takes is kept; a new generation is kept when it fits the
   * budgets beside what is kept now (else metadata only, refused, never compiled). The next rebuild
   * settles every object by the plan (keepWithinBudgets), so all replicas end the same.
   */
  const keepDecision = (key: string, object: TemplateObject, bytes: number, same: Entry | undefined): { held: boolean; fault?: TemplateFault } => {
    const namespace = object.metadata.namespace ?? '';
    if (bytes > MAX_OBJECT_BYTES) return { held: false };
    const charge = bytes + OBJECT_OVERHEAD_BYTES;
    const planned = plan.has(key) && plan.get(key) === undefined;
    if (same?.held === true || (same !== undefined && planned)) {
      held.add(namespace, charge);
      return { held: true };
    }
    if (same !== undefined) return { held: false };
    const fault = held.charge({ file: `sidecartemplate ${key}`, name: object.metadata.name ?? '', namespace }, charge);
    return fault === undefined ? { held: true } : { held: false, fault };
  };

  /**
   * Settles which objects' specs are kept by keptObjects, before each rebuild: a kept object the
   * budgets no longer take gives its spec and compiled template up (its status says why; the
   * version served before, if any, may still serve), and an object they take whose spec was not
   * kept is read again with one GET. What the store compiles is so bounded by bytes: at most the
   * budgets, whatever the number of objects (test/kube/budgets.test.ts).
   */
  const keepWithinBudgets = (): void => {
    const candidates = [...entries]
      .filter(([, e]) => e.bytes <= MAX_OBJECT_BYTES)
      .map(([key, e]) => ({
        key,
        name: e.object.metadata.name ?? '',
        namespace: e.object.metadata.namespace ?? '',
        created: e.object.metadata.creationTimestamp ?? '',
        incumbent: servedAsIs(e.object),
        bytes: e.bytes + OBJECT_OVERHEAD_BYTES,
      }));
    plan = keptObjects(candidates, home);
    for (const [key, fault] of plan) {
      const e = entries.get(key)!;
      if (fault !== undefined) {
        if (e.held) held.add(e.object.metadata.namespace ?? '', -(e.bytes + OBJECT_OVERHEAD_BYTES));
        e.held = false;
        e.object = metadataOnly(e.object);
        e.result = { ok: false, faults: [fault] };
      } else if (!e.held && !e.unread) void fetchAgain(key, e);
    }
  };

  /** Reads an object again whose spec the budgets now take; a failure waits for the next rebuild. */
  const fetchAgain = async (key: string, e: Entry): Promise<void> => {
    if (fetching.has(key) || closed) return;
    fetching.add(key);
    try {
      const obj = (await kube.custom.getNamespacedCustomObject({
        group,
        version,
        plural,
        namespace: e.object.metadata.namespace ?? '',
        name: e.object.metadata.name ?? '',
      })) as TemplateObject;
      fetching.delete(key);
      if (!closed && entries.has(key)) upsert(obj);
    } catch (err) {
      // Not read again until its next event (a new Entry): a GET that keeps failing is no loop.
      fetching.delete(key);
      e.unread = true;
      logger.warn({ template: key, err: (err as Error | undefined)?.message ?? String(err) }, 'sidecartemplate not read again; trying at its next change');
      schedule();
    }
  };

  const remove = (key: string): void => {
    const e = entries.get(key);
    if (e === undefined) return;
    if (e.held) held.add(e.object.metadata.namespace ?? '', -(e.bytes + OBJECT_OVERHEAD_BYTES));
    entries.delete(key);
    schedule();
  };

  /** Lists every object in pages, forgets those no longer there, and watches from the list's resourceVersion. */
  const list = async (): Promise<void> => {
    const seen = new Set<string>();
    let next: string | undefined;
    // The version to watch from is the one of a complete list: a list that breaks off after a page
    // is read again from its start (test/kube/sidecartemplates.test.ts, "breaks off").
    let listedAt: string;
    do {
      const page = (await kube.custom.listClusterCustomObject({
        group,
        version,
        plural,
        limit: LIST_PAGE,
        ...(next !== undefined && { _continue: next }),
      })) as KubernetesListObject<TemplateObject & KubernetesObject>;
      for (const obj of page.items) {
        seen.add(objectKey(obj));
        upsert(obj);
      }
      // Custom objects come as the API's JSON: `continue`, not the typed models' `_continue`.
      const meta = page.metadata as { continue?: string; resourceVersion?: string } | undefined;
      next = meta?.continue || undefined;
      listedAt = meta?.resourceVersion ?? '';
    } while (next !== undefined && !closed);
    resourceVersion = listedAt;
    for (const key of [...entries.keys()]) if (!seen.has(key)) remove(key);
    if (!listed) {
      listed = true;
      keepWithinBudgets();
      if (queue.size === 0 && fetching.size === 0) rebuild();
      else startDrain();
    }
  };

  // A watch event's object: a SidecarTemplate, or a metav1.Status for ERROR.
  const onEvent = (phase: string, obj: TemplateObject & { code?: number }): void => {
    if (phase === 'BOOKMARK') resourceVersion = obj?.metadata?.resourceVersion ?? resourceVersion;
    else if (phase === 'ERROR') resourceVersion = obj?.code === 410 ? '' : resourceVersion;
    else if (phase === 'DELETED') remove(objectKey(obj));
    else if (phase === 'ADDED' || phase === 'MODIFIED') upsert(obj);
    if (phase !== 'ERROR' && obj?.metadata?.resourceVersion) resourceVersion = obj.metadata.resourceVersion;
  };

  const failed = (err: unknown): void => {
    if (closed) return;
    // A watch refused with 410 Gone starts from a version the apiserver no longer keeps: list again.
    if (apiStatus(err) === 410) resourceVersion = '';
    logger.warn({ err: watchFailure(err), retryInMs: backoff }, 'watching sidecartemplates failed; the last set keeps serving; retrying');
    clearTimeout(retry);
    retry = setTimeout(start, backoff);
    retry.unref();
    backoff = Math.min(backoff * 2, 30_000);
  };

  /** A list when there is no resourceVersion to watch from (first, or after 410 Gone), then a watch; a watch that ends cleanly is opened again. */
  async function start(): Promise<void> {
    if (closed) return;
    try {
      if (resourceVersion === '') await list();
      if (closed) return;
      request = await watcher.watch(path, { resourceVersion, allowWatchBookmarks: true }, onEvent, (err) => {
        if (closed) return;
        if (err) failed(err);
        else setImmediate(() => void start());
      });
      backoff = options.retryMs ?? 1000;
    } catch (err) {
      failed(err);
    }
  }
  void start();

  return {
    current: () => history?.current() ?? empty,
    synced: () => history !== undefined,
    firstList,
    refresh: schedule,
    reload: async () => undefined,
    async close() {
      closed = true;
      clearTimeout(debounce);
      clearTimeout(retry);
      request?.abort();
    },
  };
}

/** Why the list or watch failed, saying what to do for the two failures an install causes. */
function watchFailure(err: unknown): string {
  const status = apiStatus(err);
  if (status === 404)
    return `HTTP 404: the CustomResourceDefinition sidecartemplates.${group} is not installed (it is in manifests/base/crds/ and the chart's crds/)`;
  if (status === 403)
    return `HTTP 403: the injector's ServiceAccount may not get, list and watch sidecartemplates.${group} (docs/templates.md, "Templates per team")`;
  return (err as Error | undefined)?.message ?? String(err);
}

/** Why a status write failed; a 403 says which right is missing. */
function statusFailure(err: unknown): string {
  if (apiStatus(err) === 403)
    return `HTTP 403: the injector's ServiceAccount may not update sidecartemplates/status (manifests/components/sidecartemplates/rbac.yaml)`;
  return (err as Error | undefined)?.message ?? String(err);
}

/**
 * The SidecarTemplate objects of the cluster, listed once, as the set a server would serve (the
 * CLI's --templates-source cluster): invalid objects are left out and returned with their faults.
 * With `namespaces`, only those and `home` are listed, each with a namespaced list: what the
 * injector serves to their pods, read with a team's rights (test/cli/cluster-templates.test.ts).
 */
export async function listClusterTemplates(
  kube: KubeClients,
  home: string,
  namespaces?: readonly string[],
): Promise<{ set: TemplateSet; invalid: { key: string; faults: readonly string[] }[] }> {
  const items =
    namespaces === undefined
      ? await listTemplates(kube)
      : (await Promise.all([...new Set([home, ...namespaces])].map((namespace) => listTemplates(kube, namespace)))).flat();
  const candidates: ObjectCandidates[] = [];
  const invalid: { key: string; faults: readonly string[] }[] = [];
  for (const raw of items) {
    const { object: obj, bytes } = boundedObject(raw);
    const result = bytes > MAX_OBJECT_BYTES ? tooLarge(obj) : compileObject(obj);
    if (result.ok)
      candidates.push({
        key: objectKey(obj),
        created: obj.metadata.creationTimestamp ?? '',
        candidates: [result.template],
        bytes: bytes + OBJECT_OVERHEAD_BYTES,
        incumbent: servedAsIs(obj),
      });
    else invalid.push({ key: objectKey(obj), faults: result.faults.map(formatFault) });
  }
  const { set, refused } = clusterSet(candidates, home);
  for (const [key, faults] of refused) invalid.push({ key, faults: faults.map(formatFault) });
  return { set, invalid };
}

/** One list of SidecarTemplate objects: of one namespace, or of every namespace. */
async function listTemplates(kube: KubeClients, namespace?: string): Promise<(TemplateObject & KubernetesObject)[]> {
  const found =
    namespace === undefined
      ? await kube.custom.listClusterCustomObject({ group, version, plural })
      : await kube.custom.listNamespacedCustomObject({ group, version, plural, namespace });
  return (found as KubernetesListObject<TemplateObject & KubernetesObject>).items;
}

/** The versions to try for an object, newest first: the current one if valid, then the one served before. */
function candidatesOf(e: Entry): CompiledTemplate[] {
  const current = e.result?.ok === true ? [e.result.template] : [];
  return e.served === undefined || current[0] === e.served ? current : [...current, e.served];
}
