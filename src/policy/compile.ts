import type { TemplateSet } from '../templates/load.js';
import type { CompiledTemplate } from '../templates/template.js';
import { bindings, enforcesRequired, Names, policyName, requiredBinding, type PolicyOptions, type Scope } from './bindings.js';
import { mutatingPolicy } from './mutation.js';
import { contextOf, OPTED_IN, OPTED_IN_BY_BINDINGS, requiredHere } from './selection.js';
import { boundsPolicy, requiredPolicy, validatingPolicy } from './validation.js';

export { POLICY_API, PolicyApi, PolicyLabels, policyName, type PolicyOptions } from './bindings.js';

/**
 * Templates compiled to the apiserver's own admission policies (admissionregistration.k8s.io/v1,
 * GA in Kubernetes 1.36 for MutatingAdmissionPolicy, 1.30 for ValidatingAdmissionPolicy): per
 * template a MutatingAdmissionPolicy with its bindings (pod opt-in, namespace opt-in), and one
 * ValidatingAdmissionPolicy per set, the counterpart of /validate. The pod they store is the pod
 * the webhook stores, the status annotation aside (test/policy/parity*.test.ts, through the
 * apiserver's own policy plugins in kubeadmit). What CEL cannot express is refused per template with
 * the reason (policyVerdict), never approximated.
 *
 * The cluster's SidecarTemplates are compiled view by view, as the webhook serves them (setFor):
 * the cluster-wide set binds to every namespace without templates of its own, and each namespace
 * with templates of its own gets the policies of its whole view (its templates over the
 * cluster-wide ones, its defaults), bound to it alone by its name. A view's policies are the
 * policies of a directory of the same templates, so parity holds per view by construction
 * (test/policy/parity-cluster.test.ts), and an edit in one namespace changes that namespace's
 * policies and, when it gains or loses its first template, the cluster-wide bindings' list of names.
 */

/** Whether a template compiles to a policy, and why not. */
export interface PolicyVerdict {
  readonly template: string;
  /** The namespace of a SidecarTemplate object of a namespace (not cluster-wide). */
  readonly namespace?: string;
  readonly compiles: boolean;
  /** The MutatingAdmissionPolicy's name when it compiles; why not otherwise. */
  readonly detail: string;
}

export interface PolicySet {
  /** The policies and bindings, in the order to apply them. */
  readonly objects: readonly Record<string, unknown>[];
  readonly verdicts: readonly PolicyVerdict[];
}

/**
 * Whether a template compiles, and if not the first reason: a per-pod image override (checked
 * against the runtime's image reference grammar) is not compiled.
 */
export function policyVerdict(t: CompiledTemplate, namespace?: string, revision?: string): PolicyVerdict {
  const no = (detail: string): PolicyVerdict => ({ template: t.name, compiles: false, detail });
  if (t.overrides.includes('image'))
    return no("overrides (image) are checked by the webhook against the container runtime's image reference grammar; not compiled to CEL");
  if (t.spec.containers.length + t.spec.initContainers.length === 0) return no('no containers to inject');
  if (VALIDATING_NAMES.includes(t.name))
    return no(`its policy would be named as the validating policy ${policyName(t.name, namespace, revision)}: rename the template`);
  return { template: t.name, compiles: true, detail: policyName(t.name, namespace, revision) };
}

/** The names the validating policies take after the prefix, which no template's policy may take. */
const Validating = { set: 'validate', required: 'validate-required', bounds: 'validate-bounds' } as const;
const VALIDATING_NAMES: readonly string[] = Object.values(Validating);

/**
 * The policies of every template of the set that compiles, and the validating policy of the set;
 * for the cluster's SidecarTemplates (a set with per-namespace views), those of each view.
 */
export function compilePolicies(set: TemplateSet, options: PolicyOptions): PolicySet {
  const own = [...(set.namespaces ?? new Map<string, TemplateSet>())].sort(([a], [b]) => a.localeCompare(b));
  const objects: Record<string, unknown>[] = [];
  const verdicts: PolicyVerdict[] = [];
  const wide = compileView(set, { except: own.map(([ns]) => ns) }, options);
  objects.push(...wide.objects);
  verdicts.push(...wide.verdicts);
  for (const [namespace, view] of own) {
    const compiled = compileNamespacePolicies(view, namespace, options);
    objects.push(...compiled.objects);
    verdicts.push(...compiled.verdicts);
  }
  return { objects, verdicts };
}

/** The policies of one namespace's view (setFor), bound to that namespace alone; the verdicts of its own templates (the cluster-wide ones' are the cluster-wide set's). */
export function compileNamespacePolicies(view: TemplateSet, namespace: string, options: PolicyOptions): PolicySet {
  const compiled = compileView(view, { namespace }, options);
  return { objects: compiled.objects, verdicts: compiled.verdicts.filter((v) => v.namespace === namespace) };
}

function compileView(set: TemplateSet, scope: Scope, options: PolicyOptions): PolicySet {
  // In name order, whatever order the store met the objects in: the same objects on every run and replica.
  const templates = [...set.templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  const verdicts = templates.map((t) => {
    const v = policyVerdict(t, 'namespace' in scope ? scope.namespace : undefined, options.revision);
    return t.namespace !== undefined && 'namespace' in scope && t.namespace === scope.namespace ? { ...v, namespace: t.namespace } : v;
  });
  const compiled = templates.filter((_, i) => verdicts[i]!.compiles);
  const context = contextOf(set);
  const names = new Names(scope, options);
  const objects: Record<string, unknown>[] = [];
  for (const t of compiled) {
    const name = names.policy(t.name);
    const bound =
      t.required !== undefined && enforcesRequired(options)
        ? [requiredBinding('MutatingAdmissionPolicyBinding', name, t.required.namespaceSelector, scope, names)]
        : bindings('MutatingAdmissionPolicyBinding', name, scope, names);
    objects.push(mutatingPolicy(t, name, context, names), ...bound);
  }
  const validate = names.policy(Validating.set);
  // Beside the webhook (hybrid), a template it injects is its to check.
  const webhookOnly = options.hybrid === true ? [] : verdicts.filter((v) => !v.compiles).map((v) => v.template);
  objects.push(validatingPolicy(set, compiled, webhookOnly, context, validate, names), ...bindings('ValidatingAdmissionPolicyBinding', validate, scope, names));
  // The required templates are cluster-wide, the same in every view: one policy holds them everywhere.
  const held =
    enforcesRequired(options) && !('namespace' in scope) ? requiredPolicy(set.required ?? [], compiled, names.policy(Validating.required), names) : undefined;
  if (held !== undefined)
    objects.push(held, requiredBinding('ValidatingAdmissionPolicyBinding', names.policy(Validating.required), undefined, { except: [] }, names, 'all'));
  objects.push(...boundsObjects(names, held === undefined ? undefined : requiredHere(context)));
  return { objects, verdicts };
}

/**
 * The bounds policy and its bindings: those of the validating policy, or, where required templates
 * are held on every pod, one binding to every pod and the condition that the pod is opted in or
 * in a namespace where a template is required (the pods a policy may change; boundsPolicy).
 */
function boundsObjects(names: Names, required: string | undefined): Record<string, unknown>[] {
  const name = names.policy(Validating.bounds);
  if (required === undefined) return [boundsPolicy(name, names), ...bindings('ValidatingAdmissionPolicyBinding', name, names.scope, names)];
  const changed = `size(${required}) > 0 || (${OPTED_IN_BY_BINDINGS} && (${OPTED_IN}))`;
  return [boundsPolicy(name, names, changed), requiredBinding('ValidatingAdmissionPolicyBinding', name, undefined, { except: [] }, names, 'all')];
}
