import { setTimeout as sleep } from 'node:timers/promises';
import { InjectorError } from '../errors.js';
import { isRestartable, type Workload, type WorkloadKey } from '../kube/workloads.js';
import { MissingReason, StaleReason, type DriftReport, type WorkloadDrift } from './drift.js';

/**
 * `drift --restart`: rolls the workloads whose pods are stale or missing their sidecars, one at a
 * time, as `kubectl rollout restart` then `kubectl rollout status` would. Dapr's watchdog deletes
 * pods without a sidecar and nothing rolls outdated ones (istio #15617); this does both, on request.
 */

/** A workload `--restart` leaves alone, and why. */
export interface Untouched {
  readonly workload: WorkloadDrift;
  readonly why: string;
}

export interface RestartPlan {
  /** The workloads to roll, in report order (namespace, kind, name). */
  readonly restart: readonly (WorkloadDrift & WorkloadKey)[];
  readonly untouched: readonly Untouched[];
}

/** What happened to one planned workload. */
export const Outcome = {
  Restarted: 'restarted',
  /** Read before the patch, found not to roll on a restart (paused, or pods replaced only on delete). */
  Skipped: 'skipped',
  Failed: 'failed',
  TimedOut: 'timed-out',
  /** An earlier rollout failed: the run stopped before this one. */
  NotStarted: 'not-started',
} as const;
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

export interface RestartResult {
  readonly namespace: string;
  readonly kind: string;
  readonly name: string;
  readonly outcome: Outcome;
  readonly detail: string;
}

/** Why a workload needs a roll: its stale and missing pods. */
export function needs(w: WorkloadDrift): string {
  return [w.stale > 0 && `${w.stale} stale`, w.missing > 0 && `${w.missing} missing`].filter(Boolean).join(', ') + ' pod(s)';
}

/**
 * The workloads with stale or missing pods, split into those `--restart` rolls (Deployments,
 * StatefulSets, DaemonSets, at most `maxWorkloads`) and the rest: bare pods, Jobs and CronJobs are
 * never touched (nothing re-creates a bare pod, a Job's pods are not restarted in place), nor is a
 * workload whose pod template does not opt in (its pods reached it only through labels or owner
 * references written on the pods, see owners.ts), and a workload whose pods the templates would
 * refuse now is left running (its new pods would be denied).
 */
export function restartPlan(report: DriftReport, maxWorkloads: number): RestartPlan {
  const restart: (WorkloadDrift & WorkloadKey)[] = [];
  const untouched: Untouched[] = [];
  for (const w of report.workloads.filter((x) => x.stale + x.missing > 0)) {
    const kind = w.kind;
    if (!isRestartable(kind)) untouched.push({ workload: w, why: `never restarted by drift: ${w.rollout}` });
    else if (w.templateOptsIn !== true)
      untouched.push({
        workload: w,
        why: `its pod template does not opt in to injection: drift restarts only workloads whose new pods the webhooks would inject`,
      });
    else if (w.pods.some(wouldBeRefused))
      untouched.push({
        workload: w,
        why: 'the templates would refuse its pods now: restarting would leave it without pods; fix the templates or the pods first',
      });
    else if (restart.length >= maxWorkloads) untouched.push({ workload: w, why: `over --max-workloads ${maxWorkloads}: run again to roll it` });
    else restart.push({ ...w, kind });
  }
  return { restart, untouched };
}

const REFUSED: readonly (string | undefined)[] = [StaleReason.WouldBeRefused, MissingReason.WouldBeRefused];

function wouldBeRefused(p: WorkloadDrift['pods'][number]): boolean {
  return REFUSED.includes(p.reason);
}

/** The calls a restart makes (src/kube/workloads.ts), passed in so tests can count them. */
export interface WorkloadApi {
  read(w: WorkloadKey): Promise<Workload>;
  restart(w: WorkloadKey, at: Date): Promise<Workload>;
}

export interface RestartOptions {
  /** How long one rollout may take before the run stops (kubectl rollout status --timeout). */
  readonly timeoutMs: number;
  /** How often to read the workload's status while it rolls. */
  readonly pollMs: number;
  /** A progress line. */
  readonly say: (line: string) => void;
  readonly now?: () => Date;
}

/** Rolls the planned workloads one at a time, each to the end of its rollout; the first that fails or times out stops the run. */
export async function restartWorkloads(plan: RestartPlan, api: WorkloadApi, opts: RestartOptions): Promise<RestartResult[]> {
  const results: RestartResult[] = [];
  let stopped = false;
  for (const w of plan.restart) {
    const ref = { namespace: w.namespace, kind: w.kind, name: w.name };
    if (stopped) {
      results.push({ ...ref, outcome: Outcome.NotStarted, detail: 'an earlier rollout did not finish' });
      continue;
    }
    const result = await restartOne(ref, api, opts).catch((err: unknown): RestartResult => {
      if (!(err instanceof InjectorError)) throw err;
      return { ...ref, outcome: Outcome.Failed, detail: err.message };
    });
    opts.say(`${label(ref)}: ${result.outcome === Outcome.Restarted ? result.detail : `${result.outcome}: ${result.detail}`}`);
    results.push(result);
    stopped = result.outcome === Outcome.Failed || result.outcome === Outcome.TimedOut;
  }
  return results;
}

async function restartOne(ref: WorkloadKey, api: WorkloadApi, opts: RestartOptions): Promise<RestartResult> {
  const unrollable = wontRoll(ref, await api.read(ref));
  if (unrollable !== undefined) return { ...ref, outcome: Outcome.Skipped, detail: unrollable };
  const now = opts.now ?? (() => new Date());
  opts.say(`${label(ref)}: restarting`);
  await api.restart(ref, now());
  const deadline = Date.now() + opts.timeoutMs;
  let said = '';
  for (;;) {
    const status = rolloutStatus(ref, await api.read(ref));
    if (status.failed !== undefined) return { ...ref, outcome: Outcome.Failed, detail: status.failed };
    if (status.done) return { ...ref, outcome: Outcome.Restarted, detail: status.message };
    if (status.message !== said) opts.say(`${label(ref)}: ${status.message}`);
    said = status.message;
    if (Date.now() >= deadline)
      return { ...ref, outcome: Outcome.TimedOut, detail: `not rolled out after ${opts.timeoutMs / 1000}s (--timeout): ${status.message}` };
    await sleep(Math.min(opts.pollMs, Math.max(0, deadline - Date.now())));
  }
}

function label(w: WorkloadKey): string {
  return `${w.namespace} ${w.kind}/${w.name}`;
}

/**
 * Why a restart would not replace the workload's pods, so it is not patched: a paused Deployment
 * (kubectl rollout restart refuses it too), or an OnDelete update strategy, under which a changed
 * template reaches a pod only when the pod is deleted.
 */
export function wontRoll(ref: WorkloadKey, w: Workload): string | undefined {
  const spec = w.spec as { paused?: boolean; updateStrategy?: { type?: string } } | undefined;
  if (ref.kind === 'Deployment' && spec?.paused === true) return 'the Deployment is paused: kubectl rollout resume it first';
  if (ref.kind !== 'Deployment' && spec?.updateStrategy?.type === 'OnDelete') {
    return `updateStrategy OnDelete replaces pods only when they are deleted: kubectl -n ${ref.namespace} delete pod ... (one at a time)`;
  }
  return undefined;
}

/** Where a rollout stands: done, still going (with kubectl's wording), or failed for good. */
export interface RolloutStatus {
  readonly done: boolean;
  readonly message: string;
  readonly failed?: string;
}

/** `kubectl rollout status`'s verdict on a workload (kubectl's polymorphichelpers/rollout_status.go). */
export function rolloutStatus(ref: WorkloadKey, w: Workload): RolloutStatus {
  switch (ref.kind) {
    case 'Deployment':
      return deploymentStatus(ref.name, w as DeploymentLike);
    case 'StatefulSet':
      return statefulSetStatus(w as StatefulSetLike);
    case 'DaemonSet':
      return daemonSetStatus(w as DaemonSetLike);
  }
}

interface Generations {
  readonly metadata?: { readonly generation?: number };
}
interface DeploymentLike extends Generations {
  readonly spec?: { readonly replicas?: number };
  readonly status?: {
    readonly observedGeneration?: number;
    readonly replicas?: number;
    readonly updatedReplicas?: number;
    readonly availableReplicas?: number;
    readonly conditions?: readonly { type: string; reason?: string }[];
  };
}
interface StatefulSetLike extends Generations {
  readonly spec?: { readonly replicas?: number; readonly updateStrategy?: { readonly rollingUpdate?: { readonly partition?: number } } };
  readonly status?: {
    readonly observedGeneration?: number;
    readonly readyReplicas?: number;
    readonly updatedReplicas?: number;
    readonly currentRevision?: string;
    readonly updateRevision?: string;
  };
}
interface DaemonSetLike extends Generations {
  readonly status?: {
    readonly observedGeneration?: number;
    readonly desiredNumberScheduled?: number;
    readonly updatedNumberScheduled?: number;
    readonly numberAvailable?: number;
  };
}

const waiting = (message: string): RolloutStatus => ({ done: false, message });
const OBSERVING = 'waiting for the controller to observe the restart';

function observed(w: Generations & { readonly status?: { readonly observedGeneration?: number } }): boolean {
  const observedGeneration = w.status?.observedGeneration ?? 0;
  return observedGeneration > 0 && (w.metadata?.generation ?? 0) <= observedGeneration;
}

function deploymentStatus(name: string, d: DeploymentLike): RolloutStatus {
  if (!observed(d)) return waiting(OBSERVING);
  const s = d.status ?? {};
  // The Progressing condition's reason once spec.progressDeadlineSeconds has passed without progress.
  if (s.conditions?.some((c) => c.type === 'Progressing' && c.reason === 'ProgressDeadlineExceeded'))
    return { done: false, message: '', failed: `deployment "${name}" exceeded its progress deadline` };
  const updated = s.updatedReplicas ?? 0;
  const wanted = d.spec?.replicas;
  if (wanted !== undefined && updated < wanted) return waiting(`${updated} out of ${wanted} new replicas have been updated`);
  if ((s.replicas ?? 0) > updated) return waiting(`${(s.replicas ?? 0) - updated} old replicas are pending termination`);
  if ((s.availableReplicas ?? 0) < updated) return waiting(`${s.availableReplicas ?? 0} of ${updated} updated replicas are available`);
  return { done: true, message: 'successfully rolled out' };
}

function statefulSetStatus(s: StatefulSetLike): RolloutStatus {
  if (!observed(s)) return waiting(OBSERVING);
  const st = s.status ?? {};
  const wanted = s.spec?.replicas;
  if (wanted !== undefined && (st.readyReplicas ?? 0) < wanted) return waiting(`waiting for ${wanted - (st.readyReplicas ?? 0)} pod(s) to be ready`);
  const partition = s.spec?.updateStrategy?.rollingUpdate?.partition;
  if (partition !== undefined && wanted !== undefined) {
    if (partition < wanted && (st.updatedReplicas ?? 0) < wanted - partition)
      return waiting(`partitioned roll out: ${st.updatedReplicas ?? 0} out of ${wanted - partition} new pods have been updated`);
    return { done: true, message: `partitioned roll out complete: ${st.updatedReplicas ?? 0} new pods have been updated` };
  }
  if (st.updateRevision !== st.currentRevision)
    return waiting(`rolling update to revision ${st.updateRevision ?? ''}: ${st.updatedReplicas ?? 0} pods updated`);
  return { done: true, message: `successfully rolled out: ${st.readyReplicas ?? 0} pod(s) at revision ${st.currentRevision ?? ''}` };
}

function daemonSetStatus(d: DaemonSetLike): RolloutStatus {
  if (!observed(d)) return waiting(OBSERVING);
  const s = d.status ?? {};
  const desired = s.desiredNumberScheduled ?? 0;
  if ((s.updatedNumberScheduled ?? 0) < desired) return waiting(`${s.updatedNumberScheduled ?? 0} out of ${desired} new pods have been updated`);
  if ((s.numberAvailable ?? 0) < desired) return waiting(`${s.numberAvailable ?? 0} of ${desired} updated pods are available`);
  return { done: true, message: 'successfully rolled out' };
}
