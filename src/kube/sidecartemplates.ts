import { makeInformer, type Informer, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { formatFault } from '../errors.js';
import type { Logger } from '../log.js';
import { clusterSet, compileObject, loadedCondition, objectKey, SidecarTemplateResource, type ObjectCandidates, statusSays, type ObjectResult, type TemplateObject, type TemplateObjectStatus } from '../templates/cluster.js';
import { SetHistory } from '../templates/history.js';
import type { TemplateSet } from '../templates/load.js';
import type { CompiledTemplate } from '../templates/template.js';
import { HISTORY_WINDOW_MS, type ReloadResult, type TemplateStore } from '../templates/watch.js';
import { apiStatus, type KubeClients } from './client.js';

const { group, version, plural } = SidecarTemplateResource;

/** A status write that meets 409 Conflict is tried again this many times, after 100, 200, 400 ... ms. */
const STATUS_RETRIES = 5;
const STATUS_BACKOFF_MS = 100;

export interface ClusterTemplateStoreOptions {
  readonly logger: Logger;
  /** The directory's set when both sources are used: cluster-wide, shadowed by the objects in the injector's namespace. */
  readonly base?: () => TemplateSet;
  readonly historyWindowMs?: number;
  /** Events come in bursts (a list, `kubectl apply -f dir/`): wait this long for quiet before rebuilding. */
  readonly debounceMs?: number;
  /** Wait before restarting the informer after the API failed it (doubled up to 30 s). */
  readonly retryMs?: number;
  readonly onReload?: (result: ReloadResult) => void;
}

/** The SidecarTemplate objects of the cluster as a template store (issue 23). */
export interface ClusterTemplateStore extends TemplateStore {
  /** True once the informer's first full list is in the set: readiness waits for it. */
  synced(): boolean;
  /** Resolves when the first full list is in the set. */
  readonly firstList: Promise<void>;
  /** Rebuilds the set now (the directory's set changed). */
  refresh(): void;
}

/** What is known of one object: the object, the result for its generation, and the version served for it. */
interface Entry {
  readonly object: TemplateObject;
  readonly generation: string;
  readonly result: ObjectResult;
  /** The version last served: still served while a newer one is invalid or its default conflicts. */
  served?: CompiledTemplate | undefined;
  /** The condition last written for this generation of the object: each is tried once (a failure is logged, not retried until the spec changes). */
  written?: string;
}

/**
 * Watches SidecarTemplate objects in every namespace with client-node's informer (list, then watch
 * from the list's resourceVersion; a 410 Gone lists again) and serves them as one template set:
 * each object checked alone when its generation changes, an invalid one reported in its status and
 * not served, its last valid version served in its place; a deleted object is removed. Until the
 * first list the set is empty and `synced()` false; when the API is unreachable the set stays as it
 * was and the informer is restarted with a backoff.
 */
export function openClusterTemplateStore(kube: KubeClients, options: ClusterTemplateStoreOptions): ClusterTemplateStore {
  const { logger } = options;
  const home = kube.namespace;
  const path = `/apis/${group}/${version}/${plural}`;
  let listed = false;
  const list = async (): Promise<KubernetesListObject<TemplateObject & KubernetesObject>> => {
    const found = (await kube.custom.listClusterCustomObject({ group, version, plural })) as KubernetesListObject<TemplateObject & KubernetesObject>;
    listed = true;
    return found;
  };
  const informer: Informer<TemplateObject & KubernetesObject> = makeInformer(kube.config, path, list);
  const entries = new Map<string, Entry>();
  let history: SetHistory | undefined;
  const empty: TemplateSet = Object.freeze({ templates: new Map(), defaults: [], digest: 'none', source: `sidecartemplates in ${home}` });
  let closed = false;
  let debounce: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let backoff = options.retryMs ?? 1000;
  let resolveFirst!: () => void;
  const firstList = new Promise<void>((resolve) => (resolveFirst = resolve));

  const rebuild = (): void => {
    if (closed) return;
    const { set: next, served, refused } = clusterSet([...entries].map(([key, e]) => ({ key, created: e.object.metadata.creationTimestamp ?? '', candidates: candidatesOf(e) })), home, options.base?.());
    for (const [key, e] of entries) {
      e.served = served.get(key);
      const conflict = refused.get(key);
      void writeStatus(e, conflict === undefined || !e.result.ok ? e.result : { ok: false, faults: conflict });
    }
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

  const schedule = (): void => {
    if (closed || history === undefined) return; // before the first list, start() rebuilds once it is in
    clearTimeout(debounce);
    debounce = setTimeout(rebuild, options.debounceMs ?? 50);
    debounce.unref();
  };

  const writeStatus = async (e: Entry, result: ObjectResult): Promise<void> => {
    const obj = e.object;
    const condition = loadedCondition(result, obj.metadata.generation, new Date());
    const says = `${condition.status}\0${condition.message}`;
    if (statusSays(obj, condition) || e.written === says) return;
    e.written = says;
    if (!result.ok) logger.error({ template: objectKey(obj), faults: result.faults.map(formatFault), serving: e.served?.version ?? null }, 'sidecartemplate NOT served as it is now; serving its last valid version (serving), or none');
    const status = { ...(obj.metadata.generation !== undefined && { observedGeneration: obj.metadata.generation }), conditions: [condition] };
    try {
      await putStatus(obj, status);
    } catch (err) {
      logger.warn({ template: objectKey(obj), err: statusFailure(err) }, 'sidecartemplate status not written');
    }
  };

  /**
   * PUT of the status subresource with the object's resourceVersion. A 409 (another client, such as
   * `kubectl label`, wrote first) is retried against the latest object, with backoff, as long as it
   * is still the generation judged: a new generation gets its own write, and a status another
   * replica wrote meanwhile for this generation stands (test/kube/sidecartemplates.test.ts, "409").
   */
  const putStatus = async (obj: TemplateObject, status: TemplateObjectStatus): Promise<void> => {
    const namespace = obj.metadata.namespace ?? '';
    const name = obj.metadata.name ?? '';
    let latest = obj;
    for (let attempt = 0; ; attempt++) {
      try {
        await kube.custom.replaceNamespacedCustomObjectStatus({ group, version, plural, namespace, name, body: { ...latest, status } });
        return;
      } catch (err) {
        if (apiStatus(err) !== 409 || attempt >= STATUS_RETRIES || closed) throw err;
      }
      await new Promise((r) => setTimeout(r, STATUS_BACKOFF_MS * 2 ** attempt).unref());
      latest = (await kube.custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as TemplateObject;
      if (latest.metadata.generation !== obj.metadata.generation || latest.metadata.uid !== obj.metadata.uid) return;
      if (latest.status?.observedGeneration === obj.metadata.generation) return;
    }
  };

  const upsert = (obj: TemplateObject): void => {
    const key = objectKey(obj);
    // generation counts changes of the spec only (the status subresource): a status write is no change.
    const generation = `${obj.metadata.uid ?? ''}/${obj.metadata.generation ?? obj.metadata.resourceVersion ?? ''}`;
    const known = entries.get(key);
    const result = known?.generation === generation ? known.result : compileObject(obj);
    // What was written for this generation stays known: an event of our own status write, or of
    // another replica's that judged differently, then brings no second write (no ping-pong).
    const written = known?.generation === generation ? known.written : undefined;
    entries.set(key, { object: obj, generation, result, ...(known?.served !== undefined && { served: known.served }), ...(written !== undefined && { written }) });
    if (!result.ok && known?.generation !== generation) {
      options.onReload?.({ ok: false, digest: generation, time: new Date(), serving: history?.current().digest ?? 'none', faults: result.faults, error: `sidecartemplate ${key} is invalid` });
    }
    schedule();
  };

  informer.on('add', upsert);
  informer.on('update', upsert);
  informer.on('delete', (obj) => {
    entries.delete(objectKey(obj));
    schedule();
  });
  informer.on('connect', () => {
    backoff = options.retryMs ?? 1000;
  });
  // The informer stops on an error (the API unreachable, 403); the set keeps serving meanwhile.
  informer.on('error', (err: unknown) => {
    if (closed) return;
    logger.warn({ err: watchFailure(err), retryInMs: backoff }, 'watching sidecartemplates failed; the last set keeps serving; retrying');
    clearTimeout(retry);
    retry = setTimeout(start, backoff);
    retry.unref();
    backoff = Math.min(backoff * 2, 30_000);
  });

  function start(): void {
    if (closed) return;
    informer.start().then(
      () => {
        // start() also resolves when the list failed (reported through 'error'): only a list counts.
        if (listed && history === undefined) rebuild();
      },
      () => undefined, // reported through the 'error' callback, which schedules the retry
    );
  }
  start();

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
      await informer.stop();
    },
  };
}

/** Why the list or watch failed, saying what to do for the two failures an install causes. */
function watchFailure(err: unknown): string {
  const status = apiStatus(err);
  if (status === 404) return `HTTP 404: the CustomResourceDefinition sidecartemplates.${group} is not installed (it is in manifests/base/crds/ and the chart's crds/)`;
  if (status === 403) return `HTTP 403: the injector's ServiceAccount may not get, list and watch sidecartemplates.${group} (docs/templates.md, "Templates per team")`;
  return (err as Error | undefined)?.message ?? String(err);
}

/** Why a status write failed; a 403 says which right is missing. */
function statusFailure(err: unknown): string {
  if (apiStatus(err) === 403) return `HTTP 403: the injector's ServiceAccount may not update sidecartemplates/status (manifests/components/sidecartemplates/rbac.yaml)`;
  return (err as Error | undefined)?.message ?? String(err);
}

/**
 * The SidecarTemplate objects of the cluster, listed once, as the set a server would serve (the
 * CLI's --templates-source cluster): invalid objects are left out and returned with their faults.
 */
export async function listClusterTemplates(kube: KubeClients, home: string): Promise<{ set: TemplateSet; invalid: { key: string; faults: readonly string[] }[] }> {
  const found = (await kube.custom.listClusterCustomObject({ group, version, plural })) as KubernetesListObject<TemplateObject & KubernetesObject>;
  const candidates: ObjectCandidates[] = [];
  const invalid: { key: string; faults: readonly string[] }[] = [];
  for (const obj of found.items) {
    const result = compileObject(obj);
    if (result.ok) candidates.push({ key: objectKey(obj), created: obj.metadata.creationTimestamp ?? '', candidates: [result.template] });
    else invalid.push({ key: objectKey(obj), faults: result.faults.map(formatFault) });
  }
  const { set, refused } = clusterSet(candidates, home);
  for (const [key, faults] of refused) invalid.push({ key, faults: faults.map(formatFault) });
  return { set, invalid };
}

/** The versions to try for an object, newest first: the current one if valid, then the one served before. */
function candidatesOf(e: Entry): CompiledTemplate[] {
  const current = e.result.ok ? [e.result.template] : [];
  return e.served === undefined || current[0] === e.served ? current : [...current, e.served];
}
