import { InjectorError } from '../errors.js';
import type { Pod } from '../kube/types.js';
import { renderValues } from '../templates/placeholders.js';
import { digestOf, NativeSidecar, type CompiledTemplate, type RenderedTemplate } from '../templates/template.js';
import { findConflicts } from './conflicts.js';
import { applyOverrides, overridesFor } from './overrides.js';

/** Facts about a pod that its object alone may not tell (the CLI injects pod templates, which have no owner). */
export interface InjectionContext {
  /** The pod belongs to a Job (directly, or through a CronJob); default: read from ownerReferences. */
  readonly ownedByJob?: boolean;
}

/**
 * Renders the selected templates for one pod, exactly as the mutating and the validating handler
 * both need them: placeholders expanded, native sidecars decided for Job pods, per-pod overrides
 * applied. Throws OVERRIDE_REFUSED for an override the template does not allow, and
 * TEMPLATE_CONFLICT when the templates cannot all go into one pod.
 */
export function renderTemplates(pod: Pod, templates: readonly CompiledTemplate[], namespace: string, context: InjectionContext = {}): RenderedTemplate[] {
  const values = renderValues(pod, namespace);
  const job = context.ownedByJob ?? isOwnedByJob(pod);
  const rendered = templates.map((t) => applyOverrides(nativeFor(t, t.render(values), job), overridesFor(t, values.annotations)));
  const conflicts = findConflicts(rendered);
  if (conflicts.length > 0) throw new InjectorError('TEMPLATE_CONFLICT', [conflicts.map((c) => c.message).join('; ')]);
  return rendered;
}

/**
 * A pod made by the Job controller (a CronJob's pods too: a CronJob makes Jobs, which make the pods)
 * has a controller ownerReference to a batch/v1 Job.
 */
export function isOwnedByJob(pod: Pod): boolean {
  const owners = pod.metadata?.ownerReferences ?? [];
  return Array.isArray(owners) && owners.some((o) => o['kind'] === 'Job' && typeof o['apiVersion'] === 'string' && o['apiVersion'].startsWith('batch/'));
}

// A regular sidecar container keeps a Job's pod running forever; as a native sidecar it is stopped
// when the main containers finish (KEP-753), so `nativeSidecar: jobs` switches for Job pods only.
function nativeFor(t: CompiledTemplate, r: RenderedTemplate, job: boolean): RenderedTemplate {
  if (t.nativeMode !== NativeSidecar.JobsOnly || !job) return r;
  return { ...r, nativeSidecar: true, containers: r.containers.map((c) => ({ ...c, restartPolicy: 'Always' })), digest: digestOf([r.digest, 'native']) };
}
