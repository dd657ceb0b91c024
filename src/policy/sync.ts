import { InjectorError, TemplateSetError } from '../errors.js';
import type { PolicyApi, PolicyObject } from '../kube/policies.js';
import type { Logger } from '../log.js';
import type { PolicyCondition } from '../templates/cluster.js';
import type { TemplateSet } from '../templates/load.js';
import type { CompiledTemplate } from '../templates/template.js';
import { SidecarTemplateResource } from '../templates/cluster.js';
import { compileTemplateSet } from '../templates/load.js';
import {
  compilePolicies,
  PolicyAnnotations,
  PolicyApi as PolicyApiVersion,
  PolicyLabels,
  policyVerdict,
  type PolicyOptions,
  type PolicySet,
  type PolicyVerdict,
} from './compile.js';

/** Why a sync failed, a closed set (the failures counter's reason label). */
export const SyncFailure = { Forbidden: 'forbidden', NotServed: 'not-served', Api: 'api', Compile: 'compile', Refused: 'refused' } as const;
export type SyncFailure = (typeof SyncFailure)[keyof typeof SyncFailure];

/** What one complete sync did, for the log line and the metrics. */
export interface SyncReport {
  /** Templates the policies inject and check now. */
  readonly compiled: number;
  /** Templates that do not compile (the webhook's in hybrid; not injected in policy mode unless kept). */
  readonly refused: number;
  /** Policy mode: templates that stopped compiling whose last compiled version keeps serving. */
  readonly kept: number;
  readonly applied: number;
  /** Objects the apiserver refused (POLICY_OBJECT_REFUSED): each logged; the others applied. */
  readonly refusedObjects: number;
  readonly pruned: number;
}

export interface PolicySyncOptions {
  /** The policy API, opened at the first sync (discovery) and again after a failure to open it. */
  readonly api: () => Promise<PolicyApi>;
  /**
   * What the policies are compiled with (compilePolicies), but their API version, which is the one
   * the cluster serves. Its revision names the objects and labels them for this install, so the
   * sync judges each template in each view by the names the compile gives it there (policyVerdict).
   * Hybrid: a template that stops compiling goes to the webhook, so its policy goes; policy mode: it
   * keeps the version its policies in the cluster were compiled from (as the webhook keeps a
   * template's last valid version).
   */
  readonly policies: Omit<PolicyOptions, 'apiVersion'>;
  readonly logger: Logger;
  readonly onSynced?: (report: SyncReport) => void;
  readonly onFailed?: (reason: SyncFailure, err: InjectorError) => void;
  /** First wait after a failure, doubled up to maxRetryMs. */
  readonly retryMs?: number;
  readonly maxRetryMs?: number;
}

/** Keeps the policies in the cluster equal to what the template set compiles to. */
export interface PolicySync {
  /** The set to sync to: synced now, or after the sync in progress or the backoff; only the latest set counts. */
  update(set: TemplateSet): void;
  /** True once one sync has completed: policy mode's readiness waits for it. */
  synced(): boolean;
  /** True once the first sync has finished, complete or failed: hybrid's readiness waits for it. */
  attempted(): boolean;
  /**
   * Whether a policy injects and checks `t` in pods of `namespace` (hybrid: the webhook leaves it to
   * it there): the MutatingAdmissionPolicy of that namespace's view for `t` (its own view, else the
   * cluster-wide set's, as the last complete sync bound them) is in the cluster after that sync,
   * and the apiserver refused none of its objects in it (test/server/hybrid.test.ts "per view").
   */
  byPolicy(t: CompiledTemplate, namespace: string): boolean;
  /**
   * A token that changes whenever byPolicy's answers for pods of `namespace` may have: one per
   * view, new after a complete sync that changed what that view's policies hold (or which view the
   * namespace reads). The answer cache keeps answers per this token too, so no kept answer
   * outlives the policies it was decided by, and a sync for one namespace's change costs the
   * others none of theirs (test/server/hybrid.test.ts "until a sync completes").
   */
  byPolicyGeneration(namespace: string): object;
  close(): void;
}

/**
 * A sync is: list this install's objects, compile the set, server-side apply every object (one
 * field manager, force), then delete each listed object the compile no longer makes. A failure
 * before the end prunes nothing and is retried after a backoff (1 s doubling to 60 s), never in a
 * tight loop; a template set that fails to load never reaches here (the stores keep the last valid
 * one), so a broken template never removes a working policy. An object the apiserver refuses (400,
 * 422) is logged and counted, and the sync goes on with the others: one bad object never blocks
 * the rest (test/policy/sync.test.ts "an object the apiserver refuses"); a 403 or a network
 * failure stops the sync and is retried.
 *
 * What is kept is read from the cluster, never from this process's memory: in policy mode a
 * template of the set that no longer compiles is compiled again from the spec its
 * MutatingAdmissionPolicy holds (PolicyAnnotations), and when that cannot be done its objects are
 * left as they are; only the objects of a template gone from its view, or of a view gone, are
 * pruned. So a restarted replica, and every replica of a rollout, keeps what the first kept
 * (test/policy/sync.test.ts: "a restarted injector keeps", "replicas with different template sets").
 * Every replica syncs: server-side apply of the same objects by one field manager is idempotent,
 * and a replica with an older set is corrected by the next sync of a newer one, so there is
 * nothing a leader would add (test/policy/sync.test.ts: two replicas, same objects, no conflict).
 */
export function createPolicySync(options: PolicySyncOptions): PolicySync {
  return new Sync(options);
}

/**
 * One install's sync: at most one pass at a time, always for the latest set (`#run`); a failed pass
 * retried after the backoff (`#failed`); one pass (`#pass`) lists, compiles, applies and prunes, and
 * keeps what its policies serve for byPolicy.
 */
class Sync implements PolicySync {
  readonly #options: PolicySyncOptions;
  readonly #revision: string | undefined;
  readonly #keepLastCompiled: boolean;
  /** Only this install's objects (labelled as Names.metadata labels them): another install (a revision) or a hand-made policy is never pruned. */
  readonly #selector: string;
  readonly #firstRetry: number;
  #api: PolicyApi | undefined;
  /** The set to sync to, and the last set a pass completed for. */
  #wanted: TemplateSet | undefined;
  #done: TemplateSet | undefined;
  #attempted = false;
  #running = false;
  #retry: NodeJS.Timeout | undefined;
  #backoff: number;
  #closed = false;
  /** The views' templates (viewKeyOf) whose policies are in the cluster after the last complete pass. */
  #served: ReadonlySet<string> = new Set();
  /** The namespaces with views of their own in the last complete pass: the others are bound to the cluster-wide set's policies. */
  #views: ReadonlySet<string> = new Set();
  /** Per view ('' the cluster-wide set's): what its policies hold (served keys) and the token of that. */
  #viewTokens: ReadonlyMap<string, ViewToken> = new Map();
  /** The digest of the set whose templates that do not compile were last warned about. */
  #warnedFor: string | undefined;

  constructor(options: PolicySyncOptions) {
    this.#options = options;
    this.#revision = options.policies.revision;
    this.#keepLastCompiled = options.policies.hybrid !== true;
    this.#selector = `${PolicyLabels.managedBy}=sidecar-injector,${PolicyLabels.policies}=${this.#revision ?? 'default'}`;
    this.#firstRetry = options.retryMs ?? 1000;
    this.#backoff = this.#firstRetry;
  }

  update(set: TemplateSet): void {
    this.#wanted = set;
    void this.#run();
  }

  synced(): boolean {
    return this.#done !== undefined;
  }

  attempted(): boolean {
    return this.#attempted;
  }

  /** A function of its own, not a method: the handlers are given it alone (main.ts). */
  readonly byPolicyGeneration = (namespace: string): object => this.#viewTokens.get(this.#views.has(namespace) ? namespace : '')?.token ?? NO_VIEW;
  readonly byPolicy = (t: CompiledTemplate, namespace: string): boolean => this.#served.has(`${this.#views.has(namespace) ? namespace : ''}/${t.name}`);

  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
  }

  /** A pass for the latest set, unless one runs, a retry waits, the sync is closed, or that set is synced; then the next. */
  async #run(): Promise<void> {
    if (this.#running || this.#retry !== undefined || this.#closed || this.#wanted === undefined || this.#wanted === this.#done) return;
    this.#running = true;
    const set = this.#wanted;
    try {
      const report = await this.#pass(set);
      this.#done = set;
      this.#backoff = this.#firstRetry;
      this.#options.logger.info(report, 'policies synced');
      this.#options.onSynced?.(report);
    } catch (err) {
      this.#failed(err);
    } finally {
      this.#running = false;
      this.#attempted = true;
    }
    void this.#run();
  }

  /** A pass that failed: counted, logged as the user reads it, and retried after the backoff, which doubles up to maxRetryMs. */
  #failed(err: unknown): void {
    const { logger, onFailed, maxRetryMs = 60_000 } = this.#options;
    const error = err instanceof CompileFailed ? err.error : syncError(err);
    const reason = err instanceof CompileFailed ? SyncFailure.Compile : failureOf(error);
    onFailed?.(reason, error);
    logger.error({ err: error, reason, retryInSeconds: this.#backoff / 1000 }, `policies not synced: ${error.message}`);
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      void this.#run();
    }, this.#backoff);
    this.#retry.unref();
    this.#backoff = Math.min(this.#backoff * 2, maxRetryMs);
  }

  /** One pass: list this install's objects, compile the set (with what is kept), apply every object, prune the stale ones. */
  async #pass(set: TemplateSet): Promise<SyncReport> {
    const api = (this.#api ??= await this.#options.api());
    const present = await api.list(this.#selector);
    const { effective, kept, held } = this.#keepLastCompiled
      ? withKept(set, present, this.#revision)
      : { effective: set, kept: new Set<string>(), held: new Set<string>() };
    const compiled = this.#compile(effective, api);
    this.#warnRefused(set, kept);
    const objects = compiled.objects as unknown as readonly PolicyObject[];
    const refusals = await this.#applyAll(api, objects);
    const stale = staleObjects(present, objects, held, compiled.unsynced);
    for (const obj of stale) await api.remove(obj);
    this.#served = servedBy(present, objects, refusals, stale);
    this.#views = new Set(effective.namespaces?.keys());
    this.#viewTokens = viewTokens(this.#served, this.#views, this.#viewTokens);
    const refused = compiled.verdicts.filter((v) => !v.compiles).length;
    return {
      compiled: compiled.verdicts.length - refused,
      refused,
      kept: kept.size,
      applied: objects.length - refusals.length,
      refusedObjects: refusals.length,
      pruned: stale.length,
    };
  }

  /** The policies of the set, in the MutatingAdmissionPolicy version the cluster serves; a compile that throws (a bug of ours) fails the pass as CompileFailed. */
  #compile(set: TemplateSet, api: PolicyApi): PolicySet {
    const apiVersion = api.mutatingApiVersion === PolicyApiVersion.v1beta1 ? PolicyApiVersion.v1beta1 : PolicyApiVersion.v1;
    try {
      return compilePolicies(set, { ...this.#options.policies, apiVersion });
    } catch (err) {
      throw new CompileFailed(syncError(err));
    }
  }

  /** Every object applied in order; one the apiserver refuses is counted, logged and skipped. Returns those refused. */
  async #applyAll(api: PolicyApi, objects: readonly PolicyObject[]): Promise<PolicyObject[]> {
    const { logger, onFailed } = this.#options;
    const refused: PolicyObject[] = [];
    for (const obj of objects) {
      const refusal = await applyOne(api, obj);
      if (refusal === undefined) continue;
      refused.push(obj);
      onFailed?.(SyncFailure.Refused, refusal);
      logger.error({ err: refusal, kind: obj.kind, name: obj.metadata.name }, `policy not applied: ${refusal.message}`);
    }
    return refused;
  }

  /** One warning per template that does not compile in a view it is in, once per template set (not per retry). */
  #warnRefused(set: TemplateSet, kept: ReadonlySet<string>): void {
    if (this.#warnedFor === set.digest) return;
    this.#warnedFor = set.digest;
    for (const refusal of refusalsOf(set, this.#revision)) {
      const { fields, message } = refusalWarning(refusal, set, kept, this.#keepLastCompiled);
      this.#options.logger.warn(fields, message);
    }
  }
}

/**
 * The warning for a template that does not compile in a view it is in, judged in each view by the
 * names it takes there: a cluster-wide template whose objects' names are too long only in some
 * namespaces' views is named with those namespaces (test/policy/sync.test.ts "judges each template
 * in the view").
 */
function refusalWarning(
  { template: t, verdict, views }: Refusal,
  set: TemplateSet,
  kept: ReadonlySet<string>,
  keepLastCompiled: boolean,
): { fields: Record<string, unknown>; message: string } {
  const keptHere = kept.has(templateKey(t));
  // A cluster-wide template that compiles in the cluster-wide view fails only in the namespaces named.
  const only = views.includes('') || templateKey(set.templates.get(t.name)) !== templateKey(t) ? undefined : views;
  const where = only === undefined ? '' : ` in the view of namespace${only.length > 1 ? 's' : ''} ${listed(only)}`;
  const then = keepLastCompiled ? 'pods that select it are refused' : 'the webhook injects it';
  const fields = {
    template: t.name,
    ...(t.namespace !== undefined && { namespace: t.namespace }),
    ...(only !== undefined && { views: only.slice(0, LISTED) }),
    reason: verdict.detail,
    kept: keptHere,
    ...(verdict.error !== undefined && { code: verdict.error.code }),
  };
  const message = keptHere
    ? `template ${t.name} no longer compiles to a policy${where}: its last compiled version keeps injecting (${verdict.detail})`
    : `template ${t.name} does not compile to a policy${where}: ${only === undefined ? then : `${then} there`} (${verdict.detail})`;
  return { fields, message };
}

/**
 * The listed objects the compile no longer makes, but those of templates held and of views that did
 * not compile (`unsynced`), which stay as they are in the cluster; bindings first, as they were
 * applied after their policies: a binding never names a policy that is gone.
 */
function staleObjects(
  present: readonly PolicyObject[],
  objects: readonly PolicyObject[],
  held: ReadonlySet<string>,
  unsynced: readonly string[],
): PolicyObject[] {
  const wantedKeys = new Set(objects.map(keyOf));
  const notSynced = new Set(unsynced);
  return present
    .filter((o) => !wantedKeys.has(keyOf(o)) && !held.has(viewKeyOf(o)) && !notSynced.has(o.metadata.labels?.[PolicyLabels.namespace] ?? ''))
    .sort((a, b) => Number(!a.kind.endsWith('Binding')) - Number(!b.kind.endsWith('Binding')));
}

/**
 * The views' templates (viewKeyOf) whose MutatingAdmissionPolicy is in the cluster after a pass:
 * applied, or listed and not pruned (a view that did not compile keeps its objects), and none of
 * whose objects the apiserver refused in the pass (a policy without its bindings injects nothing).
 */
function servedBy(
  present: readonly PolicyObject[],
  objects: readonly PolicyObject[],
  refused: readonly PolicyObject[],
  stale: readonly PolicyObject[],
): ReadonlySet<string> {
  const notThere = new Set([...refused, ...stale].map(keyOf));
  const refusedViews = new Set(refused.map(viewKeyOf));
  const there = [...objects, ...present].filter((o) => o.kind === 'MutatingAdmissionPolicy' && !notThere.has(keyOf(o)));
  return new Set(there.map(viewKeyOf).filter((key) => key !== '' && !refusedViews.has(key)));
}

/**
 * The `Policy` condition of a SidecarTemplate object (serve --mode policy and hybrid), written by the
 * template store beside `Loaded`: True naming the MutatingAdmissionPolicy that injects the object's
 * template, or False with the reason it does not compile, where `kubectl get sct -o yaml` shows it
 * (test/policy/sync.test.ts). `home` is the injector's namespace, whose objects are cluster-wide.
 */
export function policyConditions(home: string, revision: string | undefined, hybrid: boolean) {
  return (t: CompiledTemplate, generation: number | undefined, now: Date): PolicyCondition => {
    const own = t.namespace === undefined || t.namespace === home ? undefined : t.namespace;
    const verdict = policyVerdict(t, own, revision);
    const at = now.toISOString().replace(/\.\d+Z$/, 'Z');
    const observed = generation === undefined ? {} : { observedGeneration: generation };
    if (verdict.compiles)
      return {
        type: 'Policy',
        status: 'True',
        reason: 'Compiled',
        message: `injected by MutatingAdmissionPolicy ${verdict.detail}`,
        ...observed,
        lastTransitionTime: at,
      };
    const then = hybrid
      ? 'the webhook injects it'
      : 'its last compiled version, if any, keeps injecting; pods that select it otherwise are refused (mode hybrid lets the webhook inject it)';
    return {
      type: 'Policy',
      status: 'False',
      reason: 'NotCompiled',
      message: `not compiled to a policy: ${verdict.detail}; ${then}`,
      ...observed,
      lastTransitionTime: at,
    };
  };
}

/** A template's identity across sets: its namespace (a SidecarTemplate object's) and name. */
function templateKey(t: CompiledTemplate | undefined): string {
  return t === undefined ? '' : `${t.namespace ?? ''}/${t.name}`;
}

function keyOf(o: PolicyObject): string {
  return `${o.kind}/${o.metadata.name}`;
}

/** The view (its namespace, empty for the cluster-wide set) and template an object belongs to; empty for a validating policy's. */
function viewKeyOf(o: PolicyObject): string {
  const template = o.metadata.annotations?.[PolicyAnnotations.template];
  return template === undefined ? '' : `${o.metadata.labels?.[PolicyLabels.namespace] ?? ''}/${template}`;
}

/** The views of a set by the namespace label of their objects: '' the cluster-wide set, else the namespace whose own view it is. */
function viewsOf(set: TemplateSet): [string, TemplateSet][] {
  return [['', set], ...(set.namespaces ?? [])];
}

/** A template's verdict in a view ('' the cluster-wide set): with the names its objects take there, as compileView judges it. */
function verdictIn(t: CompiledTemplate, view: string, revision: string | undefined): PolicyVerdict {
  return policyVerdict(t, view === '' ? undefined : view, revision);
}

/** A template that does not compile in some views it is in: its verdict in the first, and those views. */
interface Refusal {
  readonly template: CompiledTemplate;
  readonly verdict: PolicyVerdict;
  readonly views: string[];
}

/** Every template of the set and of its namespaces' views that does not compile in a view it is in, once each. */
function refusalsOf(set: TemplateSet, revision: string | undefined): Refusal[] {
  const all = new Map<string, Refusal>();
  for (const [view, { templates }] of viewsOf(set))
    for (const t of templates.values()) {
      const verdict = verdictIn(t, view, revision);
      if (verdict.compiles) continue;
      const seen = all.get(templateKey(t));
      if (seen === undefined) all.set(templateKey(t), { template: t, verdict, views: [view] });
      else seen.views.push(view);
    }
  return [...all.values()];
}

/** At most this many names in a log line that lists namespaces. */
const LISTED = 5;

function listed(names: readonly string[]): string {
  const more = names.length - LISTED;
  return names.slice(0, LISTED).join(', ') + (more > 0 ? ` and ${more} more` : '');
}

/**
 * The set (and each namespace's view) with each template that does not compile replaced by the
 * version its MutatingAdmissionPolicy in the cluster was compiled from; `kept`: the keys of those
 * replaced; `held`: the views' templates (viewKeyOf) that neither compile nor could be compiled
 * again (a policy written without its spec, or a spec this version refuses), whose objects stay
 * as they are.
 */
function withKept(
  set: TemplateSet,
  present: readonly PolicyObject[],
  revision: string | undefined,
): { effective: TemplateSet; kept: ReadonlySet<string>; held: ReadonlySet<string> } {
  const policies = new Map(present.filter((o) => o.kind === 'MutatingAdmissionPolicy').map((o) => [viewKeyOf(o), o]));
  const kept = new Set<string>();
  const held = new Set<string>();
  const substitute = (view: TemplateSet, namespace: string): TemplateSet => {
    const templates = new Map<string, CompiledTemplate>();
    let changed = false;
    for (const [name, t] of view.templates) {
      const key = `${namespace}/${name}`;
      const use = verdictIn(t, namespace, revision).compiles ? t : compiledAgain(policies.get(key), t, namespace, revision);
      if (use === undefined) held.add(key);
      if (use !== undefined && use !== t) {
        kept.add(templateKey(t));
        changed = true;
      }
      templates.set(name, use ?? t);
    }
    if (!changed) return view;
    const swap = (t: CompiledTemplate): CompiledTemplate => templates.get(t.name) ?? t;
    return { ...view, templates, defaults: view.defaults.map(swap), ...(view.required !== undefined && { required: view.required.map(swap) }) };
  };
  const wide = substitute(set, '');
  const views = set.namespaces === undefined ? undefined : new Map([...set.namespaces].map(([ns, view]) => [ns, substitute(view, ns)]));
  const effective = views === undefined ? wide : { ...wide, namespaces: views };
  return { effective, kept, held };
}

/**
 * The template `t` was when `policy` was compiled from it: its spec as written, loaded with this
 * version's loader (schema and rules) as a SidecarTemplate of its own; undefined when the policy
 * holds no spec, or the spec does not load or does not compile in the view (`view`) here.
 */
function compiledAgain(policy: PolicyObject | undefined, t: CompiledTemplate, view: string, revision: string | undefined): CompiledTemplate | undefined {
  const source = policy?.metadata.annotations?.[PolicyAnnotations.source];
  if (policy === undefined || source === undefined) return undefined;
  const file = `MutatingAdmissionPolicy ${policy.metadata.name}`;
  const { group, version, kind } = SidecarTemplateResource;
  let spec: unknown;
  try {
    spec = JSON.parse(source);
  } catch {
    return undefined;
  }
  const text = JSON.stringify({ apiVersion: `${group}/${version}`, kind, metadata: { name: t.name }, spec });
  try {
    const again = compileTemplateSet([{ file, text, ...(t.namespace !== undefined && { namespace: t.namespace }) }], file).templates.get(t.name);
    return again !== undefined && verdictIn(again, view, revision).compiles ? again : undefined;
  } catch (err) {
    if (err instanceof TemplateSetError) return undefined;
    throw err;
  }
}

/** The object applied, or the apiserver's refusal of it (POLICY_OBJECT_REFUSED); any other failure is thrown, and the sync retried. */
async function applyOne(api: PolicyApi, obj: PolicyObject): Promise<InjectorError | undefined> {
  try {
    await api.apply(obj);
    return undefined;
  } catch (err) {
    if (err instanceof InjectorError && err.code === 'POLICY_OBJECT_REFUSED') return err;
    throw err;
  }
}

/** A failure of the sync as a user reads it: an InjectorError as it is, anything else (a bug of ours) as POLICY_SYNC_FAILED naming it. */
function syncError(err: unknown): InjectorError {
  return err instanceof InjectorError ? err : new InjectorError('POLICY_SYNC_FAILED', [err instanceof Error ? err.message : String(err)], { cause: err });
}

/** A compile that threw (a bug of ours): counted under its own reason. */
class CompileFailed extends Error {
  constructor(readonly error: InjectorError) {
    super(error.message, { cause: error });
  }
}

function failureOf(err: InjectorError): SyncFailure {
  if (err.code === 'POLICY_API_FORBIDDEN') return SyncFailure.Forbidden;
  if (err.code === 'POLICY_API_NOT_SERVED') return SyncFailure.NotServed;
  return SyncFailure.Api;
}

/** What one view's policies hold, as the sorted keys of `served`, and the token standing for it. */
interface ViewToken {
  readonly holds: string;
  readonly token: object;
}

/** The token of every namespace before the first complete sync. */
const NO_VIEW = Object.freeze({});

/** Each view's token after a sync: the one before where the view holds the same, else a new one. */
function viewTokens(served: ReadonlySet<string>, views: ReadonlySet<string>, before: ReadonlyMap<string, ViewToken>): ReadonlyMap<string, ViewToken> {
  const byView = new Map<string, string[]>([['', []], ...[...views].map((v): [string, string[]] => [v, []])]);
  for (const key of served) byView.get(key.slice(0, key.indexOf('/')))?.push(key);
  const tokens = new Map<string, ViewToken>();
  for (const [view, keys] of byView) {
    const holds = keys.sort().join('\n');
    const kept = before.get(view);
    tokens.set(view, kept !== undefined && kept.holds === holds ? kept : { holds, token: {} });
  }
  return tokens;
}
