import { InjectorError } from '../errors.js';
import { Keys } from '../inject/keys.js';
import { Reason, refusalReason, selectTemplates } from '../inject/policy.js';
import { isOwnedByJob, renderTemplates } from '../inject/render.js';
import type { Placement } from '../templates/placement.js';
import type { TemplateSet } from '../templates/load.js';
import type { RenderedTemplate } from '../templates/template.js';
import { parseDocuments, podSites, type PodSite } from '../workload/workload.js';
import { loadTemplates, processIO, readInput, type InputOptions, type IO } from './args.js';

/**
 * Namespaces whose pods the shipped webhook configuration (manifests/webhooks.yaml, namespaceSelector
 * on kubernetes.io/metadata.name) never sends to the injector: the system namespaces, where a webhook
 * can keep the cluster from healing itself, and the injector's own. Namespaces labelled runlevel 0
 * or 1 are skipped too, but a file does not carry namespace labels.
 */
export const SystemNamespaces: readonly string[] = ['kube-system', 'kube-public', 'kube-node-lease', 'sidecar-injector'];

/** The verdict on one pod. */
export interface Explanation {
  readonly object: string;
  readonly namespace: string;
  readonly verdict: 'injected' | 'not-injected' | 'rejected';
  /** A stable reason (the server's Reason values, plus `namespace-rule`). */
  readonly reason: string;
  /** Why, in words. */
  readonly why: readonly string[];
  /** Per template: what goes where. */
  readonly templates: readonly { readonly name: string; readonly detail: string }[];
}

/** `explain`'s flags, as the command line gave them. */
export interface ExplainOptions extends InputOptions {
  readonly output: 'text' | 'json';
}

/** `sidecar-injector explain -f FILE|-`: for each pod, whether it would be injected, with what and why. */
export async function explainCommand(values: ExplainOptions, io: IO = processIO): Promise<number> {
  const format = values.output;
  const text = await readInput('explain', values.filename, io.stdin);
  const set = await loadTemplates(values.templatesDir);
  const docs = parseDocuments(text, values.filename === '-' ? 'standard input' : (values.filename ?? ''));
  const found = docs.flatMap((d) => podSites(d, values.namespace ?? 'default')).map((s) => explainPod(s, set));
  io.stdout(format === 'json' ? `${JSON.stringify(found, null, 2)}\n` : found.map(printExplanation).join(''));
  if (found.length === 0) io.stderr('explain: the input holds no Pod and no workload with a pod template\n');
  return 0;
}

/** Explains one pod the way the mutating handler would decide it. */
export function explainPod(site: PodSite, set: TemplateSet): Explanation {
  const base = { object: site.title, namespace: site.namespace };
  const labels = site.pod.metadata?.labels ?? {};
  const annotations = site.pod.metadata?.annotations ?? {};
  if (SystemNamespaces.includes(site.namespace)) {
    return { ...base, verdict: 'not-injected', reason: 'namespace-rule', why: [`namespace ${site.namespace} is excluded by the webhook configuration's namespaceSelector`], templates: [] };
  }
  let selection: ReturnType<typeof selectTemplates>;
  try {
    selection = selectTemplates(site.pod, set);
  } catch (err) {
    if (!(err instanceof InjectorError)) throw err;
    return { ...base, verdict: 'rejected', reason: Reason.UnknownTemplate, why: [err.message], templates: [] };
  }
  if (!selection.inject) return { ...base, verdict: 'not-injected', reason: selection.reason, why: [selection.detail], templates: [] };
  const why = [`label ${Keys.inject}="${labels[Keys.inject] ?? ''}"`];
  why.push(selection.explicit ? `annotation ${Keys.templates}="${annotations[Keys.templates] ?? ''}" names the templates` : `no ${Keys.templates} annotation: the default templates apply`);
  const job = site.ownedByJob ?? isOwnedByJob(site.pod);
  if (job) why.push('the pod belongs to a Job');
  let rendered: RenderedTemplate[];
  try {
    rendered = renderTemplates(site.pod, selection.templates, site.namespace, { ownedByJob: job });
  } catch (err) {
    if (!(err instanceof InjectorError)) throw err;
    return { ...base, verdict: 'rejected', reason: refusalReason(err), why: [...why, err.message], templates: [] };
  }
  const templates = rendered.map((r) => ({ name: r.name, detail: describeTemplate(r, selection.templates.find((t) => t.name === r.name)?.spec.containers[0]?.image) }));
  return { ...base, verdict: 'injected', reason: Reason.Injected, why, templates };
}

function describeTemplate(r: RenderedTemplate, templateImage: string | undefined): string {
  const parts: string[] = [];
  const list = r.nativeSidecar ? 'initContainers' : 'containers';
  const where = placementText(r.placement ?? (r.nativeSidecar ? 'first' : 'last'));
  for (const c of r.containers) parts.push(`${r.nativeSidecar ? 'native sidecar' : 'container'} "${c.name}" (${c.image ?? 'no image'}) in ${list}, ${where}`);
  for (const c of r.initContainers) parts.push(`init container "${c.name}", first`);
  if (r.volumes.length > 0) parts.push(`volumes ${r.volumes.map((v) => v.name).join(', ')}`);
  if (r.env.length > 0 || r.volumeMounts.length > 0) parts.push(`into each app container: ${[...r.env.map((e) => `env ${e.name}`), ...r.volumeMounts.map((m) => `mount ${m.mountPath}`)].join(', ')}`);
  const first = r.containers[0];
  if (first !== undefined && templateImage !== undefined && first.image !== templateImage && !templateImage.includes('{{')) parts.push(`image overridden to ${first.image ?? ''}`);
  return parts.join('; ');
}

function placementText(p: Placement): string {
  if (typeof p === 'string') return p;
  return 'before' in p ? `before "${p.before}"` : `after "${p.after}"`;
}

function printExplanation(e: Explanation): string {
  const head = e.verdict === 'injected' ? `injected with ${e.templates.map((t) => t.name).join(', ')}` : e.verdict === 'rejected' ? 'would be REJECTED' : 'not injected';
  const lines = [`${e.object}: ${head} (${e.reason})`, ...e.why.map((w) => `  - ${w}`), ...e.templates.map((t) => `  * ${t.name}: ${t.detail}`)];
  return `${lines.join('\n')}\n`;
}
