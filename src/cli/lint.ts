import { formatFault, InjectorError } from '../errors.js';
import { lintCluster, lintTemplates, type LintFinding, type LintReport } from '../lint/lint.js';
import { PodSecurityLevel } from '../lint/pod.js';
import { compilePolicies, policyName, policyVerdict, type PolicyVerdict } from '../policy/compile.js';
import { findCelcost, measureCost, samplePod, type CostReport } from '../policy/cost.js';
import { loadTemplateSet, setFor, type TemplateSet } from '../templates/load.js';
import { listTemplateObjects, processIO, templatesDir, type IO } from './args.js';

/** `lint`'s arguments and flags, as the command line gave them. */
export interface LintOptions {
  /** The templates directory; absent: the one `serve` would use. */
  readonly dir?: string;
  readonly output: 'text' | 'json';
  /**
   * The Pod Security Standard injected sample pods must meet. `privileged`, the Standards' own name
   * for the level without restrictions, and its older alias `none` check only that they are valid pods.
   */
  readonly podSecurity: PodSecurityLevel | typeof PRIVILEGED;
  /** Exit 1 on warnings too. */
  readonly strict: boolean;
  /** `cluster`: the cluster's SidecarTemplate objects instead of a directory. */
  readonly templatesSource?: string;
  /** With the cluster: the injector's namespace, whose templates are cluster-wide. */
  readonly templatesNamespace?: string;
  readonly kubeconfig?: string;
  /** With the cluster: lint what this namespace's pods see; absent: every namespace with templates. */
  readonly namespace?: string;
  readonly allNamespaces?: boolean;
  /** Also say, one line per template, whether it compiles to an admission policy (`policies`) and why not. */
  readonly policies?: boolean;
}

/** The Pod Security Standards' name for their level without restrictions (lint's `none`). */
const PRIVILEGED = 'privileged';

/**
 * `sidecar-injector lint [DIR] [--pod-security privileged|baseline|restricted] [--strict]`: every finding
 * as `file:line:column: error|warning: template "x": /path: message`. Errors are what the server
 * refuses to load; warnings come from sample pods. Exit 1 on any error (for pre-commit hooks and
 * CI), and on any warning with --strict; 0 otherwise.
 */
export async function lintCommand(values: LintOptions, io: IO = processIO): Promise<number> {
  const level = values.podSecurity === PRIVILEGED ? PodSecurityLevel.None : values.podSecurity;
  if (values.templatesSource === 'cluster') return lintClusterCommand(values, level, io);
  if (values.namespace !== undefined || values.allNamespaces === true)
    throw new InjectorError('USAGE', ['lint: -n and -A choose namespaces of the cluster; add --templates-source cluster']);
  const dir = values.dir ?? templatesDir(undefined);
  const report = await lintTemplates(dir, level).catch((err: unknown) => {
    throw missingDir(err, dir);
  });
  const set = values.policies === true && report.errors === 0 ? await loadTemplateSet(dir) : undefined;
  const policies = set === undefined ? undefined : await costedVerdicts(set);
  io.stdout(
    values.output === 'json'
      ? `${JSON.stringify(policies === undefined ? report : { ...report, policies: policies.verdicts, ...(policies.unchecked !== undefined && { policiesCostUnchecked: policies.unchecked }) }, null, 2)}\n`
      : textReport(report, dir, level) + (policies === undefined ? '' : policyLines(policies)),
  );
  return exitStatus(report, values.strict);
}

/** A verdict with the apiserver's CEL cost of the template's policy on a sample pod, when celcost measured it. */
type CostedVerdict = PolicyVerdict & { readonly cost?: number };

interface CostedVerdicts {
  readonly verdicts: readonly CostedVerdict[];
  /** Problems of the validating policy, one line each. */
  readonly validating: readonly string[];
  readonly limits?: CostReport['limits'];
  /** Why the cost is unchecked (celcost not built). */
  readonly unchecked?: string;
}

/**
 * Each template's verdict, and when celcost is built its policy's cost on a sample pod: a policy
 * the apiserver's CEL refuses (an expression that does not compile, or over the cost limits)
 * turns its template's verdict to webhook only, with the reason (test/policy/cost.test.ts).
 */
async function costedVerdicts(set: TemplateSet): Promise<CostedVerdicts> {
  const verdicts = [...set.templates.values()].map((t) => policyVerdict(t));
  const found = findCelcost();
  if ('absent' in found) return { verdicts, validating: [], unchecked: found.absent };
  const { objects } = compilePolicies(set, { namespace: 'sidecar-injector' });
  const compiled = verdicts.filter((v) => v.compiles);
  const report = await measureCost(
    found.binary,
    objects,
    compiled.map((v) => samplePod(v.template)),
    { namespace: 'default' },
  );
  const byName = new Map(report.policies.map((p) => [p.name, p]));
  const costed = verdicts.map((v): CostedVerdict => {
    const p = v.compiles ? byName.get(policyName(v.template)) : undefined;
    if (p === undefined) return v;
    if (p.problems.length > 0) return { template: v.template, compiles: false, detail: `the apiserver's CEL refuses its policy: ${p.problems[0]!}` };
    return { ...v, cost: Math.max(0, ...p.pods.map((pod) => pod.cost)) };
  });
  const validating = report.policies.filter((p) => p.kind === 'ValidatingAdmissionPolicy').flatMap((p) => p.problems.map((x) => `${p.kind} ${p.name}: ${x}`));
  return { verdicts: costed, validating, limits: report.limits };
}

/** `policy: template "x": MutatingAdmissionPolicy sidecar-injector-x (CEL cost …)`, or `webhook only: why`; then what is unchecked or refused. */
function policyLines(p: CostedVerdicts): string {
  const cost = (v: CostedVerdict): string =>
    v.cost === undefined || p.limits === undefined
      ? ''
      : ` (apiserver CEL cost on a sample pod: ${v.cost}; limits ${p.limits.perCall} per expression, ${p.limits.perPolicy} per policy)`;
  const lines = p.verdicts.map((v) => policyLine(v, cost(v)));
  for (const line of p.validating) lines.push(`policy: ${line}\n`);
  if (p.unchecked !== undefined) lines.push(`policy: CEL cost unchecked: ${p.unchecked}\n`);
  return lines.join('');
}

/** `policy: template "x": MutatingAdmissionPolicy sidecar-injector-x`, or `webhook only: why`; a namespace's template named with it. */
function policyLine(v: PolicyVerdict, cost = ''): string {
  const template = v.namespace === undefined ? `template "${v.template}"` : `template "${v.template}" of namespace ${v.namespace}`;
  return `policy: ${template}: ${v.compiles ? `MutatingAdmissionPolicy ${v.detail}${cost}` : `webhook only: ${v.detail}`}\n`;
}

/** The verdict of each template the linted views hold, once: a cluster-wide one as such, a namespace's with its namespace. */
function clusterVerdicts(set: TemplateSet, home: string, only?: string): PolicyVerdict[] {
  const views = only !== undefined ? [setFor(set, only)] : [set, ...(set.namespaces?.values() ?? [])];
  const templates = new Map(views.flatMap((v) => [...v.templates.values()].map((t) => [`${t.namespace ?? ''}/${t.name}`, t] as const)));
  return [...templates]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([, t]) => {
      const namespace = t.namespace === undefined || t.namespace === home ? undefined : t.namespace;
      return { ...policyVerdict(t, namespace), ...(namespace !== undefined && { namespace }) };
    });
}

/** `lint --templates-source cluster [-n NS | -A]`: the SidecarTemplate objects as the injector loads them, each namespace's view linted. */
async function lintClusterCommand(values: LintOptions, level: PodSecurityLevel, io: IO): Promise<number> {
  if (values.dir !== undefined) throw new InjectorError('USAGE', [`lint: give DIR (${values.dir}) or --templates-source cluster, not both`]);
  const home = values.templatesNamespace ?? 'sidecar-injector';
  const listing = await listTemplateObjects(values, undefined, values.namespace === undefined ? undefined : [values.namespace]);
  const report = lintCluster(listing, home, level, values.namespace);
  const policies = values.policies === true ? clusterVerdicts(listing.set, home, values.namespace) : undefined;
  const where =
    values.namespace === undefined
      ? `the sidecartemplates of every namespace (cluster-wide: ${home})`
      : `the sidecartemplates namespace ${values.namespace} sees (its own over ${home}'s)`;
  io.stdout(
    values.output === 'json'
      ? `${JSON.stringify(policies === undefined ? report : { ...report, policies }, null, 2)}\n`
      : textReport(report, where, level) + (policies ?? []).map((v) => policyLine(v)).join(''),
  );
  return exitStatus(report, values.strict);
}

function exitStatus(report: { readonly errors: number; readonly warnings: number }, strict: boolean): number {
  return report.errors > 0 || (strict && report.warnings > 0) ? 1 : 0;
}

/** A DIR that is not there, or not a directory, as one line that says what to fix instead of scandir's error; any other error unchanged. */
function missingDir(err: unknown, dir: string): unknown {
  const code = ((err as Error | null)?.cause as { code?: unknown } | undefined)?.code;
  if (code === 'ENOENT')
    return new InjectorError('INPUT_INVALID', [dir, 'no such directory; give lint the directory of SidecarTemplate YAML files (lint DIR)'], { cause: err });
  if (code === 'ENOTDIR')
    return new InjectorError('INPUT_INVALID', [dir, 'not a directory; give lint the directory of SidecarTemplate YAML files (lint DIR)'], { cause: err });
  return err;
}

/** The findings, one a line, then what was linted: `where` is the directory, or the cluster's namespaces. */
function textReport(report: Pick<LintReport, 'templates' | 'faults' | 'errors' | 'warnings'>, where: string, level: PodSecurityLevel): string {
  const findings = report.faults.map((f) => `${findingLine(f)}\n`).join('');
  if (report.errors > 0) return `${findings}${report.errors} error(s), ${report.warnings} warning(s) in ${where}\n`;
  const ok = `${where}: ${report.templates.length} template(s) OK (${report.templates.join(', ')}; Pod Security ${level === PodSecurityLevel.None ? PRIVILEGED : level})`;
  return report.warnings === 0 ? `${ok}\n` : `${findings}${ok}, ${report.warnings} warning(s)\n`;
}

/** `file:line:column: error|warning: ...`; the file may hold spaces (`sidecartemplate team-a/x`). */
function findingLine(f: LintFinding): string {
  const text = formatFault(f);
  return f.file + text.slice(f.file.length).replace(/^((?::\d+)*:) /, `$1 ${f.severity}: `);
}
