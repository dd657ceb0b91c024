import { overridesFor } from '../inject/overrides.js';
import { overrideAnnotations } from '../templates/override-keys.js';
import { renderTemplates } from '../inject/render.js';
import type { Container, Pod, PodSpec } from '../kube/types.js';
import type { Placement } from '../templates/placement.js';
import type { TemplateSet } from '../templates/load.js';
import { Overridable, type OverrideField } from '../templates/schema.js';
import { SERVICE_ACCOUNT_TOKEN_PATH, type CompiledTemplate, type RenderedTemplate } from '../templates/template.js';
import { podSites, type PodSite } from '../workload/workload.js';
import { admitPod, type Cluster } from './admit.js';
import { processIO, readInputs, type InputOptions, type IO } from './args.js';

/** The verdict on one pod. */
interface Explanation {
  readonly object: string;
  readonly namespace: string;
  readonly verdict: 'injected' | 'not-injected' | 'rejected';
  /** A stable reason (the server's Reason values, plus `namespace-rule`, `not-selected` and `patch-not-applicable`). */
  readonly reason: string;
  /** Why, in words. */
  readonly why: readonly string[];
  /** Per template: what goes where. */
  readonly templates: readonly { readonly name: string; readonly detail: string }[];
  /** What the AdmissionResponse would warn of. */
  readonly warnings: readonly string[];
}

/** `explain`'s flags, as the command line gave them. */
export interface ExplainOptions extends InputOptions {
  readonly output: 'text' | 'json';
}

/**
 * `sidecar-injector explain -f FILE|-`: for each pod, whether it would be injected, with what and
 * why. Exit 1 when any pod would be rejected, as `inject` does, so a script or CI job can rely on it.
 */
export async function explainCommand(values: ExplainOptions, io: IO = processIO): Promise<number> {
  const format = values.output;
  const { docs, set, cluster } = await readInputs('explain', values, io.stdin, io.stderr);
  const found = docs.flatMap((d) => podSites(d, values.namespace ?? 'default')).map((s) => explainPod(s, set, cluster));
  io.stdout(format === 'json' ? `${JSON.stringify(found, null, 2)}\n` : found.map(printExplanation).join(''));
  if (found.length === 0) io.stderr('explain: the input holds no Pod and no workload with a pod template\n');
  return found.some((e) => e.verdict === 'rejected') ? 1 : 0;
}

/** Explains one pod as the shipped webhook configurations and the server's handlers would decide it. */
function explainPod(site: PodSite, set: TemplateSet, cluster: Cluster): Explanation {
  const base = { object: site.title, namespace: site.namespace };
  const admission = admitPod({ ...site, pod: withServiceAccountToken(site.pod) }, set, cluster);
  const selection = admission.selection;
  const why = admission.why;
  const result = { ...base, verdict: admission.verdict, reason: admission.reason, why, warnings: admission.warnings };
  if (admission.verdict !== 'injected' || selection === undefined) return { ...result, templates: [] };
  const rendered = renderTemplates(site.pod, selection.templates, site.namespace);
  const overrides = overrideNotes(admission.pod, selection.templates);
  const templates = rendered.map((r) => ({ name: r.name, detail: [describeTemplate(r), ...(overrides.get(r.name) ?? [])].join('; ') }));
  return { ...result, templates };
}

/**
 * The pod as the ServiceAccount admission plugin hands it to the webhooks: unless it sets
 * `automountServiceAccountToken: false` or a container already mounts something at the token's
 * path, every container mounts a projected `kube-api-access-*` volume (plugin/pkg/admission/
 * serviceaccount). explain predicts admission, so a `serviceAccountToken: true` template is
 * explained as the cluster treats it. inject does not add it: the manifest it writes gets it from
 * the plugin when applied. The ServiceAccount object's own automount setting is not known offline.
 */
function withServiceAccountToken(pod: Pod): Pod {
  const spec = pod.spec;
  if (spec === undefined || spec['automountServiceAccountToken'] === false) return pod;
  const all = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
  if (all.some((c) => (c.volumeMounts ?? []).some((m) => m.mountPath === SERVICE_ACCOUNT_TOKEN_PATH))) return pod;
  const name = 'kube-api-access-xxxxx';
  const volume = {
    name,
    projected: {
      sources: [{ serviceAccountToken: { path: 'token' } }, { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } }],
    },
  };
  const mounted = (c: Container): Container => ({
    ...c,
    volumeMounts: [...(c.volumeMounts ?? []), { name, mountPath: SERVICE_ACCOUNT_TOKEN_PATH, readOnly: true }],
  });
  const out: PodSpec = { ...spec, containers: (spec.containers ?? []).map(mounted), volumes: [...(spec.volumes ?? []), volume] };
  if (spec.initContainers !== undefined) out.initContainers = spec.initContainers.map(mounted);
  return { ...pod, spec: out };
}

/**
 * Every override the pod's annotations apply, per template, read from the pod as stored with the
 * mutating handler's own reading (overridesFor): a pod that was injected had no refused one.
 */
function overrideNotes(stored: Pod, templates: readonly CompiledTemplate[]): ReadonlyMap<string, readonly string[]> {
  const annotations = overrideAnnotations(stored.metadata?.annotations);
  const notes = new Map<string, string[]>();
  for (const t of templates) {
    const { overrides } = overridesFor(t, annotations, templates);
    const lines = Overridable.flatMap((field) => (overrides[field] === undefined ? [] : [`${OverrideWords[field]} overridden to ${overrides[field]}`]));
    if (lines.length > 0) notes.set(t.name, lines);
  }
  return notes;
}

/** How each override field reads in `explain` (src/inject/overrides.ts: cpu and memory set the request, raising a lower limit). */
const OverrideWords: Readonly<Record<OverrideField, string>> = { image: 'image', cpu: 'cpu request', memory: 'memory request' };

function describeTemplate(r: RenderedTemplate): string {
  const parts: string[] = [];
  const list = r.nativeSidecar ? 'initContainers' : 'containers';
  const where = placementText(r.placement ?? (r.nativeSidecar ? 'first' : 'last'));
  for (const c of r.containers) parts.push(`${r.nativeSidecar ? 'native sidecar' : 'container'} "${c.name}" (${c.image ?? 'no image'}) in ${list}, ${where}`);
  for (const c of r.initContainers) parts.push(`init container "${c.name}", first`);
  if (r.volumes.length > 0) parts.push(`volumes ${r.volumes.map((v) => v.name).join(', ')}`);
  if (r.env.length > 0 || r.volumeMounts.length > 0)
    parts.push(`into ${appScope(r)}: ${[...r.env.map((e) => `env ${e.name}`), ...r.volumeMounts.map((m) => `mount ${m.mountPath}`)].join(', ')}`);
  if (r.podToken === true) parts.push("the pod's ServiceAccount token, where the pod mounts one");
  if (r.tokenVolume !== undefined) parts.push(`a ServiceAccount token of its own (volume ${r.tokenVolume})`);
  return parts.join('; ');
}

/** Which app containers get the template's env and mounts, by its appContainers (the pod's annotation may narrow it further). */
function appScope(r: RenderedTemplate): string {
  const { include, exclude } = r.appContainers ?? {};
  const base = include === undefined ? 'each app container' : `app containers ${include.join(', ')}`;
  return exclude === undefined || exclude.length === 0 ? base : `${base} except ${exclude.join(', ')}`;
}

function placementText(p: Placement): string {
  if (typeof p === 'string') return p;
  return 'before' in p ? `before "${p.before}"` : `after "${p.after}"`;
}

function printExplanation(e: Explanation): string {
  const head =
    e.verdict === 'injected' ? `injected with ${e.templates.map((t) => t.name).join(', ')}` : e.verdict === 'rejected' ? 'would be REJECTED' : 'not injected';
  const lines = [
    `${e.object}: ${head} (${e.reason})`,
    ...e.why.map((w) => `  - ${w}`),
    ...e.templates.map((t) => `  * ${t.name}: ${t.detail}`),
    ...e.warnings.map((w) => `  ! warning: ${w}`),
  ];
  return `${lines.join('\n')}\n`;
}
