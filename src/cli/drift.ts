import { InjectorError } from '../errors.js';
import { controllerOf, driftReport, PodState, type DriftReport, type Owners, type WorkloadDrift } from '../drift/drift.js';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { apiError, apiStatus, createKubeClients, KubeSource, type KubeClients } from '../kube/client.js';
import { listJobs, listLivePods, listReplicaSets, type Scope } from '../kube/pods.js';
import type { Pod } from '../kube/types.js';
import { compileTemplateSet, type TemplateSet } from '../templates/load.js';
import { loadTemplates, processIO, templatesDir, type IO } from './args.js';

/** `drift`'s flags, as the command line gave them. */
export interface DriftOptions {
  readonly templatesDir?: string;
  /** `NAMESPACE/NAME` of the installed templates ConfigMap; used when templatesDir is absent. */
  readonly templatesConfigmap: string;
  /** Absent: the kubeconfig context's namespace. */
  readonly namespace?: string;
  readonly allNamespaces: boolean;
  /** List every injected pod, not only the stale ones. */
  readonly all: boolean;
  readonly output: 'text' | 'json';
  readonly kubeconfig?: string;
}

/**
 * `sidecar-injector drift`: the running pods whose sidecars are out of date with the templates,
 * grouped by workload with the command that rolls each (Istio's `proxy-status`, Linkerd's
 * `check --proxy`). Exit status 0 whether or not pods are stale; `-o json` is for scripts.
 */
export async function driftCommand(values: DriftOptions, io: IO = processIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const kube = createKubeClients({ kubeconfig: values.kubeconfig ?? '', namespace: values.namespace ?? '', env });
  // Without any kubeconfig, client-node falls back to http://localhost:8080 and fails with a TLS message.
  if (kube.source === KubeSource.default && !kubeconfigExists(env)) {
    throw new InjectorError('KUBE_CONFIG_INVALID', ['no kubeconfig found ($KUBECONFIG is not set and ~/.kube/config does not exist)']);
  }
  const scope: Scope = values.allNamespaces ? { allNamespaces: true } : { namespace: kube.namespace };
  const [{ set, source }, pods, replicaSets, jobs] = await Promise.all([templatesFor(values, kube, env), listLivePods(kube, scope), listReplicaSets(kube, scope), listJobs(kube, scope)]);
  const owners: Owners = new Map(
    [...replicaSets, ...jobs].flatMap((o) => {
      const owner = controllerOf(o.metadata);
      return owner === undefined ? [] : [[`${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`, owner] as const];
    }),
  );
  const report = driftReport(pods.map(toPod), owners, set, { all: values.all, source });
  io.stdout(values.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : printReport(report, 'namespace' in scope ? `namespace ${scope.namespace}` : 'all namespaces'));
  return 0;
}

function kubeconfigExists(env: NodeJS.ProcessEnv): boolean {
  return (env['KUBECONFIG'] ?? '') !== '' || existsSync(join(homedir(), '.kube', 'config'));
}

/** The templates to compare with: a directory, or the ConfigMap the injector mounts, read through the API. */
async function templatesFor(values: DriftOptions, kube: KubeClients, env: NodeJS.ProcessEnv): Promise<{ set: TemplateSet; source: string }> {
  if (values.templatesDir !== undefined) return { set: await loadTemplates(values.templatesDir), source: `directory ${templatesDir(values.templatesDir, env)}` };
  const [namespace, name, ...rest] = values.templatesConfigmap.split('/');
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

/** The report as text: per workload, its stale (or, with --all, every) pod and why, then the command that rolls it. */
function printReport(report: DriftReport, where: string): string {
  const blocks = report.workloads.map(printWorkload);
  const summary =
    report.injected === 0
      ? `no injected pods in ${where}`
      : report.stale === 0
        ? `all ${report.injected} injected pod(s) in ${where} are up to date`
        : `${report.stale} of ${report.injected} injected pod(s) in ${where} are out of date, in ${report.workloads.filter((w) => w.stale > 0).length} workload(s)`;
  return `${[...blocks, `${summary} (templates: ${report.templates.source}, digest ${report.templates.digest})`].join('\n')}\n`;
}

function printWorkload(w: WorkloadDrift): string {
  const lines = [`${w.namespace} ${w.kind}/${w.name}: ${w.stale} of ${w.injected} pod(s) out of date`];
  for (const p of w.pods) lines.push(`  ${p.name}: ${p.state === PodState.Stale ? (p.detail ?? p.reason ?? '') : 'up to date'}`);
  if (w.stale > 0) lines.push(`  roll: ${w.rollout}`);
  return `${lines.join('\n')}\n`;
}
