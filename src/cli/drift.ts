import { InjectorError } from '../errors.js';
import { driftReport, PodState, type DriftReport, type NamespaceDrift, type PodDrift, type WorkloadDrift } from '../drift/drift.js';
import { ownerIndex } from '../drift/owners.js';
import { needs, Outcome, restartPlan, restartWorkloads, type RestartPlan, type RestartResult } from '../drift/restart.js';
import { apiError, apiStatus, createKubeClients, type KubeClients } from '../kube/client.js';
import {
  listCronJobs,
  listDaemonSets,
  listDeployments,
  listJobs,
  listLivePods,
  listNamespaces,
  listReplicaSets,
  listStatefulSets,
  type Scope,
} from '../kube/pods.js';
import { injectorWebhooks } from '../kube/injector-webhooks.js';
import type { Labels, Pod } from '../kube/types.js';
import { readWorkload, restartWorkload } from '../kube/workloads.js';
import { compileTemplateSet, type TemplateSet } from '../templates/load.js';
import { clusterTemplates, loadTemplates, processIO, templatesDir, type IO } from './args.js';

/** `drift`'s flags, as the command line gave them. */
export interface DriftOptions {
  readonly templatesDir?: string;
  /** `cluster`: the cluster's SidecarTemplate objects, each pod judged with its namespace's view. */
  readonly templatesSource?: string;
  /** With the cluster: the injector's namespace, whose templates are cluster-wide. */
  readonly templatesNamespace?: string;
  /** `NAMESPACE/NAME` of the installed templates ConfigMap; used when templatesDir is absent. */
  readonly templatesConfigmap: string;
  /** The install to judge (`--revision`): its templates ConfigMap, webhooks and pods; absent: the default install. */
  readonly revision?: string;
  /** Absent: the kubeconfig context's namespace. */
  readonly namespace?: string;
  readonly allNamespaces: boolean;
  /** List every injected pod, not only the stale ones. */
  readonly all: boolean;
  readonly output: 'text' | 'json';
  readonly kubeconfig?: string;
  /** Roll the Deployments, StatefulSets and DaemonSets of stale and missing pods. */
  readonly restart: boolean;
  /** Print the restart plan only (implies restart). */
  readonly dryRun: boolean;
  /** With restart: how long one rollout may take (`30s`, `5m`, `1h`). */
  readonly timeout: string;
  /** With restart: at most this many workloads per run. */
  readonly maxWorkloads: string;
  /** With restart: how often a rollout's status is read (tests shorten it). */
  readonly pollInterval: string;
}

/**
 * `sidecar-injector drift`: the running pods whose sidecars are out of date with the templates,
 * grouped by workload with the command that rolls each (Istio's `proxy-status`, Linkerd's
 * `check --proxy`). Exit status 0 whether or not pods are stale; `-o json` is for scripts.
 */
export async function driftCommand(values: DriftOptions, io: IO = processIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  // --dry-run alone asks for the plan too. The flags are checked before anything is read.
  const restart = values.restart || values.dryRun ? restartFlags(values) : undefined;
  const kube = createKubeClients({ kubeconfig: values.kubeconfig ?? '', namespace: values.namespace ?? '', env });
  const scope: Scope = values.allNamespaces ? { allNamespaces: true } : { namespace: kube.namespace };
  const [{ set, source }, pods, replicaSets, deployments, statefulSets, daemonSets, jobs, cronJobs, namespaces, webhooks] = await Promise.all([
    templatesFor(values, kube, env, (line) => io.stderr(`${line}\n`), 'namespace' in scope ? [scope.namespace] : undefined),
    listLivePods(kube, scope),
    listReplicaSets(kube, scope),
    listDeployments(kube, scope),
    listStatefulSets(kube, scope),
    listDaemonSets(kube, scope),
    listJobs(kube, scope),
    listCronJobs(kube, scope),
    listNamespaces(kube, scope),
    injectorWebhooks(kube, values.revision ?? ''),
  ]);
  if (webhooks.note !== undefined) io.stderr(`note: ${webhooks.note}\n`);
  // Owner links are followed only where the owner exists with the uid and a selector that takes the pod (src/drift/owners.ts).
  const owners = ownerIndex([
    { kind: 'ReplicaSet', items: replicaSets.map(toPod) },
    { kind: 'Deployment', items: deployments.map(toPod) },
    { kind: 'StatefulSet', items: statefulSets.map(toPod) },
    { kind: 'DaemonSet', items: daemonSets.map(toPod) },
    { kind: 'Job', items: jobs.map(toPod) },
    { kind: 'CronJob', items: cronJobs.map(toPod) },
  ]);
  // Whether a pod is opted in is decided as the webhooks' selectors decide it, with the namespaces' own labels.
  const namespaceLabels = new Map<string, Labels>(namespaces.map((n) => [n.metadata?.name ?? '', n.metadata?.labels ?? {}]));
  const report = driftReport(pods.map(toPod), owners, set, {
    all: values.all,
    source,
    optIn: { configurations: webhooks.configurations, source: webhooks.source, namespaceLabels },
    ...(values.revision !== undefined && { revision: values.revision }),
  });
  const where = `${'namespace' in scope ? `namespace ${scope.namespace}` : 'all namespaces'}${values.revision === undefined ? '' : ` (revision ${values.revision})`}`;
  if (restart === undefined) {
    io.stdout(values.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : printReport(report, where));
    return 0;
  }
  return restartCommand(report, kube, restart, values, io);
}

interface RestartFlags {
  readonly timeoutMs: number;
  readonly pollMs: number;
  readonly maxWorkloads: number;
}

function restartFlags(values: DriftOptions): RestartFlags {
  const maxWorkloads = Number(values.maxWorkloads);
  if (!Number.isInteger(maxWorkloads) || maxWorkloads < 1)
    throw new InjectorError('USAGE', [`drift: --max-workloads must be a whole number of at least 1, got "${values.maxWorkloads}"`]);
  return { timeoutMs: durationMs('--timeout', values.timeout), pollMs: durationMs('--poll-interval', values.pollInterval), maxWorkloads };
}

/** A duration as kubectl's flags take it: `300ms`, `30s`, `5m`, `1h`, `1m30s`. */
export function durationMs(flag: string, text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  const ms = parts.reduce((sum, p) => sum + Number(p[1]) * units[p[2]!]!, 0);
  if (text === '' || parts.map((p) => p[0]).join('') !== text || ms <= 0)
    throw new InjectorError('USAGE', [`drift: ${flag} must be a duration such as 30s, 5m or 1h, got "${text}"`]);
  return ms;
}

/**
 * `drift --restart`: the plan (a line per workload), then with no --dry-run the rollouts one at a
 * time with their progress, then a summary. Exit status 1 when a rollout failed or timed out. With
 * `-o json` the progress goes to stderr and the report, with the plan and outcomes, to stdout.
 */
async function restartCommand(report: DriftReport, kube: KubeClients, flags: RestartFlags, values: DriftOptions, io: IO): Promise<number> {
  const plan = restartPlan(report, flags.maxWorkloads);
  const json = values.output === 'json';
  const say = (line: string): void => (json ? io.stderr : io.stdout)(`${line}\n`);
  for (const line of planLines(plan, values.dryRun)) say(line);
  const results =
    values.dryRun || plan.restart.length === 0
      ? []
      : await restartWorkloads(
          plan,
          { read: (w) => readWorkload(kube, w), restart: (w, at) => restartWorkload(kube, w, at) },
          { timeoutMs: flags.timeoutMs, pollMs: flags.pollMs, say },
        );
  if (!values.dryRun) say(summary(results));
  if (json)
    io.stdout(
      `${JSON.stringify({ ...report, restart: { dryRun: values.dryRun, planned: plan.restart.map(ref), untouched: plan.untouched.map((u) => ({ ...ref(u.workload), why: u.why })), results } }, null, 2)}\n`,
    );
  const failed = results.some((r) => r.outcome === Outcome.Failed || r.outcome === Outcome.TimedOut);
  return failed ? 1 : 0;
}

function ref(w: WorkloadDrift): { namespace: string; kind: string; name: string; stale: number; missing: number } {
  return { namespace: w.namespace, kind: w.kind, name: w.name, stale: w.stale, missing: w.missing };
}

function planLines(plan: RestartPlan, dryRun: boolean): string[] {
  const verb = dryRun ? 'would restart' : 'will restart';
  const lines = [
    ...plan.restart.map((w) => `${verb} ${w.namespace} ${w.kind}/${w.name}: ${needs(w)}`),
    ...plan.untouched.map((u) => `leave ${u.workload.namespace} ${u.workload.kind}/${u.workload.name} (${needs(u.workload)}): ${u.why}`),
  ];
  return lines.length === 0 ? ['nothing to restart: no stale or missing pods'] : lines;
}

function summary(results: readonly RestartResult[]): string {
  const count = (o: Outcome): number => results.filter((r) => r.outcome === o).length;
  const parts = [
    `${count(Outcome.Restarted)} restarted`,
    `${count(Outcome.Skipped)} skipped`,
    `${count(Outcome.Failed) + count(Outcome.TimedOut)} failed`,
    `${count(Outcome.NotStarted)} not started`,
  ];
  return `restart: ${parts.join(', ')} of ${results.length} workload(s)`;
}

/** The ConfigMap --templates-configmap names; a revision's, as components/revision and the chart name it, when the flag keeps its default. */
export function templatesConfigmap(values: Pick<DriftOptions, 'revision' | 'templatesConfigmap'>): string {
  if (values.revision === undefined || values.templatesConfigmap !== DEFAULT_TEMPLATES_CONFIGMAP) return values.templatesConfigmap;
  return `${DEFAULT_TEMPLATES_CONFIGMAP}-${values.revision}`;
}

/** The templates ConfigMap of the default install (manifests/, the chart's release sidecar-injector). */
const DEFAULT_TEMPLATES_CONFIGMAP = 'sidecar-injector/sidecar-injector-templates';

/** The templates to compare with: a directory, the cluster's SidecarTemplate objects, or the ConfigMap the injector mounts, read through the API. */
async function templatesFor(
  values: DriftOptions,
  kube: KubeClients,
  env: NodeJS.ProcessEnv,
  note: (line: string) => void,
  namespaces: readonly string[] | undefined,
): Promise<{ set: TemplateSet; source: string }> {
  if (values.templatesSource === 'cluster') {
    const set = await clusterTemplates(values, note, kube, namespaces);
    return { set, source: set.source };
  }
  if (values.templatesDir !== undefined)
    return { set: await loadTemplates(values.templatesDir), source: `directory ${templatesDir(values.templatesDir, env)}` };
  const [namespace, name, ...rest] = templatesConfigmap(values).split('/');
  if (namespace === undefined || namespace === '' || name === undefined || name === '' || rest.length > 0) {
    throw new InjectorError('USAGE', [`drift: --templates-configmap must be NAMESPACE/NAME, got "${values.templatesConfigmap}"`]);
  }
  const configMap = await kube.core.readNamespacedConfigMap({ name, namespace }).catch((err: unknown) => {
    if (apiStatus(err) === 404) throw new InjectorError('TEMPLATES_CONFIGMAP_MISSING', [`${namespace}/${name}`], { cause: err });
    throw apiError(`get configmap ${namespace}/${name}`, err);
  });
  const files = Object.entries(configMap.data ?? {})
    .filter(([key]) => /\.ya?ml$/i.test(key))
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([key, text]) => ({ file: `configmap/${namespace}/${name}/${key}`, text }));
  if (files.length === 0) throw new InjectorError('TEMPLATES_EMPTY', [`ConfigMap ${namespace}/${name}`]);
  return { set: compileTemplateSet(files, `configmap ${namespace}/${name}`), source: `configmap ${namespace}/${name}` };
}

// client-node hands back its model classes (dates as Date); the injector works on the pod as JSON,
// as admission sends it. A pod's field names are the same in both.
function toPod(pod: object): Pod {
  return JSON.parse(JSON.stringify(pod)) as Pod;
}

/**
 * The report as text: per workload (in namespace order), its stale and missing (or, with --all,
 * every) pod and why, then the command that rolls it; with pods of more than one namespace, a line
 * of counts per namespace; then the overall line.
 */
function printReport(report: DriftReport, where: string): string {
  const blocks = report.workloads.map(printWorkload);
  const perNamespace = report.namespaces.length > 1 ? [`${report.namespaces.map(namespaceLine).join('\n')}\n`] : [];
  return `${[...blocks, ...perNamespace, `${summaryLine(report, where)} (templates: ${report.templates.source}, digest ${report.templates.digest})`].join('\n')}\n`;
}

function namespaceLine(n: NamespaceDrift): string {
  return `namespace ${n.namespace}: ${n.stale} stale, ${n.missing} missing, ${n.current} current`;
}

function summaryLine(report: DriftReport, where: string): string {
  const affected = report.workloads.filter((w) => w.stale + w.missing > 0).length;
  const missing = report.missing === 0 ? '' : `; ${report.missing} opted-in pod(s) run without their sidecars`;
  if (report.injected === 0 && report.missing === 0) return `no injected pods in ${where}`;
  if (report.stale === 0 && report.missing === 0) return `all ${report.injected} injected pod(s) in ${where} are up to date`;
  if (report.stale === 0) return `all ${report.injected} injected pod(s) in ${where} are up to date${missing}, in ${affected} workload(s)`;
  return `${report.stale} of ${report.injected} injected pod(s) in ${where} are out of date${missing}, in ${affected} workload(s)`;
}

function printWorkload(w: WorkloadDrift): string {
  const counts = [w.injected > 0 && `${w.stale} of ${w.injected} pod(s) out of date`, w.missing > 0 && `${w.missing} pod(s) missing their sidecars`]
    .filter(Boolean)
    .join(', ');
  const lines = [`${w.namespace} ${w.kind}/${w.name}: ${counts}`];
  for (const p of w.pods) lines.push(`  ${p.name}: ${podLine(p)}`);
  if (w.stale + w.missing > 0) lines.push(`  roll: ${w.rollout}`);
  return `${lines.join('\n')}\n`;
}

function podLine(p: PodDrift): string {
  if (p.state === PodState.Current) return 'up to date';
  return p.detail ?? p.reason ?? '';
}
