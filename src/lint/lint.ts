import { InjectorError, TemplateSetError, type TemplateFault } from '../errors.js';
import { findConflicts } from '../templates/conflicts.js';
import { jobCompletionWarning, keepsJobsRunning } from '../inject/jobs.js';
import { planInjection } from '../inject/mutate.js';
import { renderTemplates } from '../inject/render.js';
import type { Pod } from '../kube/types.js';
import { compileTemplateSet, positionInFiles, readTemplateDir, setFor, type TemplateSet } from '../templates/load.js';
import { renderValues } from '../templates/placeholders.js';
import type { CompiledTemplate } from '../templates/template.js';
import { admitted, countOf, excesses, Webhook, type Admitted, type Excess, type Limit } from './limits.js';
import { podFaults, type PodFault, type PodSecurityLevel } from './pod.js';
import { absentKeyWarnings, podNameWarnings } from './values.js';

/**
 * How much a finding matters. An error is exactly what the server refuses to load (lint reports the
 * loader's own faults, so serve and lint agree); a warning comes from injecting into sample pods:
 * pods differ, and the finding may or may not hold for a real one.
 */
export const Severity = { Error: 'error', Warning: 'warning' } as const;
export type Severity = (typeof Severity)[keyof typeof Severity];

/** One finding of lint: a template fault with its severity. */
export interface LintFinding extends TemplateFault {
  readonly severity: Severity;
}

/** The outcome of linting a templates directory. */
export interface LintReport {
  readonly dir: string;
  readonly templates: readonly string[];
  /** Every finding, errors first, each group in file and line order; empty when the set is good. */
  readonly faults: readonly LintFinding[];
  readonly errors: number;
  readonly warnings: number;
}

function report(dir: string, templates: readonly string[], faults: readonly LintFinding[]): LintReport {
  return { dir, templates, ...tally(faults) };
}

function tally(faults: readonly LintFinding[]): Pick<LintReport, 'faults' | 'errors' | 'warnings'> {
  const errors = faults.filter((f) => f.severity === Severity.Error).length;
  return { faults, errors, warnings: faults.length - errors };
}

/** A pod to inject into: one ordinary, one owned by a Job, one with its own init container. */
interface Sample {
  readonly name: string;
  readonly pod: Pod;
  readonly ownedByJob: boolean;
  /** The kind of its controller, whose manager writes its managedFields. */
  readonly kind: string;
}

const RESTRICTED = { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } };
const APP = {
  name: 'app',
  image: 'registry.example.com/app:1.0',
  ports: [{ name: 'http', containerPort: 8080 }],
  securityContext: RESTRICTED,
  volumeMounts: [{ name: 'app-data', mountPath: '/data' }],
};

/** The sample pods: each meets the restricted profile by itself, so every fault found is a template's. */
const Samples: readonly Sample[] = [
  {
    name: 'deployment-pod',
    kind: 'ReplicaSet',
    ownedByJob: false,
    pod: { metadata: { generateName: 'web-5d8f7c9b4-', labels: { app: 'web' } }, spec: { containers: [APP], volumes: [{ name: 'app-data', emptyDir: {} }] } },
  },
  {
    name: 'job-pod',
    kind: 'Job',
    ownedByJob: true,
    pod: {
      metadata: { generateName: 'nightly-28811520-', labels: { 'batch.kubernetes.io/job-name': 'nightly-28811520' } },
      spec: { restartPolicy: 'Never', containers: [{ ...APP, name: 'main', ports: [] }], volumes: [{ name: 'app-data', emptyDir: {} }] },
    },
  },
  {
    name: 'pod-with-init',
    kind: 'StatefulSet',
    ownedByJob: false,
    pod: {
      metadata: { name: 'db-0', labels: { app: 'db' } },
      spec: {
        initContainers: [{ name: 'setup', image: 'registry.example.com/setup:1.0', securityContext: RESTRICTED }],
        containers: [APP],
        volumes: [{ name: 'app-data', emptyDir: {} }],
      },
    },
  },
];

/**
 * Lints a templates directory. Errors: every fault the server's loader finds (compileTemplateSet,
 * the one source of template errors). Warnings, once the set loads: those of `setWarnings`, at
 * their line and column in the files.
 */
export async function lintTemplates(dir: string, level: PodSecurityLevel): Promise<LintReport> {
  const files = await readTemplateDir(dir).catch((err: Error) => {
    throw new InjectorError('INPUT_INVALID', [dir, err.message], { cause: err });
  });
  if (files.length === 0)
    return report(dir, [], [{ severity: Severity.Error, file: dir, path: '', message: new InjectorError('TEMPLATES_EMPTY', [dir]).message }]);
  let set: TemplateSet;
  try {
    set = compileTemplateSet(files, dir);
  } catch (err) {
    if (!(err instanceof TemplateSetError)) throw err;
    return report(
      dir,
      [],
      err.faults.map((f) => ({ severity: Severity.Error, ...f })),
    );
  }
  const located = setWarnings(set, level).map((f): TemplateFault => ({
    ...f,
    ...(f.line === undefined && positionInFiles(files, f.file, f.template, f.path)),
  }));
  return report(dir, templateNames(set), asWarnings(located));
}

/** The cluster's SidecarTemplate objects as `listClusterTemplates` read them: the set served, and the objects left out. */
export interface ClusterListing {
  readonly set: TemplateSet;
  /** Each invalid object (`namespace/name`) with its faults, as formatted lines. */
  readonly invalid: readonly { readonly key: string; readonly faults: readonly string[] }[];
}

/** The outcome of linting the cluster's SidecarTemplate objects. */
export interface ClusterLintReport extends Omit<LintReport, 'dir'> {
  /** The injector's namespace, whose templates are cluster-wide. */
  readonly templatesNamespace: string;
  /** The namespaces whose view was checked: the injector's (the cluster-wide set), or one's own over it. */
  readonly namespaces: readonly string[];
}

/**
 * Lints the cluster's SidecarTemplate objects as the injector loads them. Errors: every
 * invalid object, which the injector leaves out. Warnings: `setWarnings` of the set each namespace's
 * pods see (its own templates over the cluster-wide ones). `only` narrows it to one namespace: its
 * view, and the invalid objects of that namespace and of `home`, which its pods would also see.
 */
export function lintCluster(listing: ClusterListing, home: string, level: PodSecurityLevel, only?: string): ClusterLintReport {
  const namespaces = only !== undefined ? [only] : [home, ...[...(listing.set.namespaces?.keys() ?? [])].sort()];
  const views = namespaces.map((ns) => setFor(listing.set, ns));
  const seen = (key: string): boolean => only === undefined || [only, home].includes(key.slice(0, key.indexOf('/')));
  const errors = [...listing.invalid]
    .sort((a, b) => a.key.localeCompare(b.key))
    .filter((i) => seen(i.key))
    .flatMap((i) => i.faults.map((f) => invalidObject(i.key, f)));
  const templates = [...new Set(views.flatMap((v) => [...v.templates.values()].map((t) => `${t.namespace ?? ''}/${t.name}`)))].sort();
  return { templatesNamespace: home, namespaces, templates, ...tally([...errors, ...asWarnings(unique(views.flatMap((v) => setWarnings(v, level))))]) };
}

/** A fault of an invalid object as an error named `sidecartemplate NS/NAME`, the name its line already starts with. */
function invalidObject(key: string, fault: string): LintFinding {
  const file = `sidecartemplate ${key}`;
  const message = fault.startsWith(file) ? fault.slice(file.length).replace(/^: /, '') : fault;
  return { severity: Severity.Error, file, path: '', message };
}

/** Each fault once: the same finding comes from several samples, and from each namespace's view of a cluster-wide template. */
function unique(faults: readonly TemplateFault[]): TemplateFault[] {
  return [...new Map(faults.map((f) => [`${f.file}\0${f.template ?? ''}\0${f.path}\0${f.message}`, f])).values()];
}

/** Warnings in file and line order. */
function asWarnings(faults: readonly TemplateFault[]): LintFinding[] {
  const found = faults.map((f): LintFinding => ({ severity: Severity.Warning, ...f }));
  return found.sort((a, b) => a.file.localeCompare(b.file) || (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
}

function templateNames(set: TemplateSet): string[] {
  return [...set.templates.keys()].sort((a, b) => a.localeCompare(b));
}

/**
 * The warnings of a compiled set, which a directory and the cluster share: each template injected
 * alone into each sample pod, and every pair of templates, each result checked as a pod (what
 * Kubernetes warns about, the Pod Security level chosen) and for conflicts between templates;
 * placeholders that fail pods without the key they read, and `{{ pod.name }}` read as a name
 * (values.ts). Each once, without a line yet: only the caller knows the files.
 */
function setWarnings(set: TemplateSet, level: PodSecurityLevel): TemplateFault[] {
  const faults: TemplateFault[] = [];
  const all = [...set.templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  for (const t of all) for (const s of Samples) faults.push(...checkCombination([t], s, level));
  for (const t of all) faults.push(...jobSidecarWarnings(t));
  for (const t of all) faults.push(...absentKeyWarnings(t), ...podNameWarnings(t));
  all.forEach((a, i) => all.slice(i + 1).forEach((b) => faults.push(...checkCombination([a, b], Samples[0]!, level))));
  return unique(faults);
}

/** A template that keeps Job pods running: the policy's own warning (src/inject/jobs.ts), so lint, explain and admission say the same. */
function jobSidecarWarnings(t: CompiledTemplate): TemplateFault[] {
  if (!keepsJobsRunning(t)) return [];
  const job = Samples.find((s) => s.ownedByJob)!;
  const message = jobCompletionWarning(t.render(renderValues(job.pod, 'default')));
  return message === undefined ? [] : [{ file: t.file, template: t.name, path: '/spec/containers', message }];
}

/** Injects `templates` into a sample and reports what is wrong, as faults of the templates. */
function checkCombination(templates: readonly CompiledTemplate[], sample: Sample, level: PodSecurityLevel): TemplateFault[] {
  const fileOf = new Map(templates.map((t) => [t.name, t.file]));
  const rendered = templates.map((t) => t.render(renderValues(sample.pod, 'default')));
  const conflicts = findConflicts(rendered);
  if (conflicts.length > 0) {
    return conflicts.map((c) => ({
      file: fileOf.get(c.template) ?? '',
      template: c.template,
      path: c.path,
      message: `${c.message}: the two cannot be selected together`,
    }));
  }
  const injected = injectInto(templates, sample);
  if (injected instanceof InjectorError) return refusedFaults([refusedInjection(injected)], templates, sample);
  const over = excesses(injected);
  if (over.length > 0) return refusedFaults(over, templates, sample);
  const owners = ownersOf(renderTemplates(sample.pod, templates, 'default', { ownedByJob: sample.ownedByJob }));
  return podFaults(injected.pod, level).map((f) => attribute(f, owners, templates, sample));
}

/**
 * What serve answers and receives when it injects `templates` into a sample, as lint inspects it
 * (a mount of no volume is kept, to be reported), or the mutating webhook's refusal.
 */
function injectInto(templates: readonly CompiledTemplate[], sample: Sample): Admitted | InjectorError {
  try {
    // The render budget left open: a rendering over it makes a patch over --max-patch-kib, which
    // the patch's meter measures (limits.ts) to say how far over it goes and which template adds what.
    const context = { ownedByJob: sample.ownedByJob, lenientMounts: true, renderBytes: Number.POSITIVE_INFINITY };
    return admitted(sample.pod, planInjection(sample.pod, templates, 'default', context), sample.kind);
  } catch (err) {
    if (!(err instanceof InjectorError)) throw err;
    return err;
  }
}

/** The mutating webhook's denial of an injection it cannot make (annotations over Kubernetes' 256 KiB, a refused override). */
function refusedInjection(err: InjectorError): Excess {
  return { webhook: Webhook.Mutating, refusal: err.message, code: err.code };
}

/** Every refusal serve would give an injection into a sample (none: []). */
function refusalsOf(templates: readonly CompiledTemplate[], sample: Sample): Excess[] {
  const injected = injectInto(templates, sample);
  return injected instanceof InjectorError ? [refusedInjection(injected)] : excesses(injected);
}

/**
 * Serve's refusals of a sample given `templates`, as faults of the templates that cause them: the
 * mutating webhook denies an injection it cannot make or whose patch is over --max-patch-kib, and
 * the validating webhook (failurePolicy Fail) a pod over a pod limit or a review over a body limit
 * (src/lint/limits.ts counts them with the server's own checks), so every pod given the templates
 * is refused. In a combination, a template refused alone is the one to blame, and lint reports it
 * when it checks that template alone on the same sample, so the combination adds nothing; a
 * refusal no template meets alone is blamed on every template of the combination, with what each
 * holds alone.
 */
function refusedFaults(over: readonly Excess[], templates: readonly CompiledTemplate[], sample: Sample): TemplateFault[] {
  const [only] = templates;
  if (templates.length === 1 && only !== undefined) {
    return over.map((e) => ({
      file: only.file,
      template: only.name,
      path: '/spec',
      message: `injected into sample pod "${sample.name}", ${refusedBy(e, 'this template')}${excessText(e)}: ${e.refusal}`,
    }));
  }
  const overAlone = new Set(templates.flatMap((t) => refusalsOf([t], sample).map(keyOf)));
  return over.filter((e) => !overAlone.has(keyOf(e))).flatMap((e) => blameTogether(e, templates, sample));
}

/** What an excess is refused for: its limit, or the code of its refusal when no limit of serve's lifts it. */
const keyOf = (e: Excess): string => e.limit?.flag ?? e.code;

/** A fault for each of `templates`, which are refused only together: with what each of them holds alone of the limit. */
function blameTogether(e: Excess, templates: readonly CompiledTemplate[], sample: Sample): TemplateFault[] {
  const limit = e.limit;
  const alone = (t: CompiledTemplate, of: Limit): string => {
    const injected = injectInto([t], sample);
    return `"${t.name}" alone ${injected instanceof InjectorError ? 'refused' : countOf(injected, of)}`;
  };
  const each = limit === undefined ? '' : ` (${templates.map((t) => alone(t, limit)).join(', ')})`;
  return templates.map((t) => {
    const others = templates.filter((o) => o !== t).map((o) => `"${o.name}"`);
    const message = `with template${others.length > 1 ? 's' : ''} ${others.join(', ')}, injected into sample pod "${sample.name}", ${refusedBy(e, 'them together')}${excessText(e)}, which no template does alone${each}: ${e.refusal}`;
    return { file: t.file, template: t.name, path: '/spec', message };
  });
}

function refusedBy(e: Excess, given: string): string {
  return `the ${e.webhook} webhook would refuse every pod given ${given}`;
}

/** How far over its limit an excess goes, naming the flag: `: 1100 env vars in one container, 100 over --max-env-per-container (1000)`. */
function excessText(e: Excess): string {
  if (e.limit === undefined || e.count === undefined) return '';
  return `: ${e.count} ${e.limit.unit}, ${e.count - e.limit.limit} over --${e.limit.flag} (${e.limit.shown ?? e.limit.limit})`;
}

interface Owner {
  readonly template: string;
  readonly path: string;
}

function ownersOf(rendered: ReturnType<typeof renderTemplates>): Map<string, Owner> {
  const owners = new Map<string, Owner>();
  const own = (key: string, template: string, path: string): void => void (owners.has(key) || owners.set(key, { template, path }));
  for (const r of rendered) {
    r.containers.forEach((c, i) => own(`container:${c.name}`, r.name, `/spec/containers/${i}`));
    r.initContainers.forEach((c, i) => own(`container:${c.name}`, r.name, `/spec/initContainers/${i}`));
    r.volumes.forEach((v, i) => own(`volume:${v.name}`, r.name, `/spec/volumes/${i}`));
    r.volumeMounts.forEach((m, i) => own(`mount:${m.name}`, r.name, `/spec/volumeMounts/${i}`));
  }
  return owners;
}

// A fault in a sidecar points into its template (a fault between two containers, into the one a
// template added: a native sidecar comes before the app); one in an application container comes
// from what a template added to it (a mount); anything else is reported against the first template.
function attribute(f: PodFault, owners: Map<string, Owner>, templates: readonly CompiledTemplate[], sample: Sample): TemplateFault {
  const fileOf = (name: string): string => templates.find((t) => t.name === name)?.file ?? '';
  const byContainer = f.container === undefined ? undefined : owners.get(`container:${f.container}`);
  if (byContainer !== undefined)
    return { file: fileOf(byContainer.template), template: byContainer.template, path: byContainer.path + f.path, message: f.message };
  const other = f.other;
  const byOther = other === undefined ? undefined : owners.get(`container:${other.container}`);
  if (other !== undefined && byOther !== undefined)
    return { file: fileOf(byOther.template), template: byOther.template, path: byOther.path + other.path, message: f.message };
  const byVolume = f.volume === undefined ? undefined : owners.get(`volume:${f.volume}`);
  if (byVolume !== undefined) return { file: fileOf(byVolume.template), template: byVolume.template, path: byVolume.path + f.path, message: f.message };
  const byMount = f.mount === undefined ? undefined : owners.get(`mount:${f.mount}`);
  if (byMount !== undefined) {
    const message = `the application containers get a mount of volume "${f.mount}", which neither the template nor the pod defines`;
    return { file: fileOf(byMount.template), template: byMount.template, path: `${byMount.path}/name`, message };
  }
  const first = templates[0]!;
  return { file: first.file, template: first.name, path: '/spec', message: `in sample pod "${sample.name}": ${f.message}` };
}
