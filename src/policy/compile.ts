import { InjectorError } from '../errors.js';
import { escapeToken } from '../patch/pointer.js';
import type { TemplateSet } from '../templates/load.js';
import { Formats } from '../templates/schema.js';
import type { CompiledTemplate } from '../templates/template.js';
import { bindings, enforcesRequired, Names, policyName, requiredBinding, type PolicyOptions, type Scope } from './bindings.js';
import { celObject, Definition, placeholderCel } from './cel.js';
import { mutatingPolicy } from './mutation.js';
import { contextOf, OPTED_IN, OPTED_IN_BY_BINDINGS, requiredHere, type SetContext } from './selection.js';
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
 *
 * One template never stops the others: a template whose values have no CEL form, or whose objects'
 * names the apiserver would refuse, is "not compiled" with the reason (policyVerdict); anything else
 * a template's compile throws makes that template alone not compiled, and a view that throws
 * compiles to nothing, its objects in the cluster left as they are (PolicySet.unsynced)
 * (test/policy/compile.test.ts "one template never stops the others").
 */

/**
 * What the sync reads back from the cluster (src/policy/sync.ts): every object of a template names
 * it, and its MutatingAdmissionPolicy holds the template's spec as written, so a freshly started
 * injector compiles the version the cluster runs again when the template has stopped compiling
 * (test/policy/sync.test.ts, "a restarted injector keeps").
 */
export const PolicyAnnotations = { template: 'sidecar-injector.io/template', source: 'sidecar-injector.io/template-source' } as const;

/** Whether a template compiles to a policy, and why not. */
export interface PolicyVerdict {
  readonly template: string;
  /** The namespace of a SidecarTemplate object of a namespace (not cluster-wide). */
  readonly namespace?: string;
  readonly compiles: boolean;
  /** The MutatingAdmissionPolicy's name when it compiles; why not otherwise. */
  readonly detail: string;
  /** Not compiled for a fault of the template's (TEMPLATE_NOT_COMPILED, naming the template and the JSON path): for the log. */
  readonly error?: InjectorError;
}

export interface PolicySet {
  /** The policies and bindings, in the order to apply them. */
  readonly objects: readonly Record<string, unknown>[];
  readonly verdicts: readonly PolicyVerdict[];
  /**
   * The views that failed to compile, by the value of their objects' PolicyLabels.namespace label
   * ("" for the cluster-wide set): the sync leaves their objects in the cluster as they are.
   */
  readonly unsynced: readonly string[];
}

/**
 * Whether a template compiles, and if not the first reason: a per-pod image override (checked
 * against the runtime's image reference grammar) is not compiled, nor a value with no CEL form or
 * objects named beyond what the apiserver accepts (TEMPLATE_NOT_COMPILED, with the JSON path).
 */
export function policyVerdict(t: CompiledTemplate, namespace?: string, revision?: string): PolicyVerdict {
  const no = (detail: string): PolicyVerdict => ({ template: t.name, compiles: false, detail });
  if (t.overrides.includes('image'))
    return no("overrides (image) are checked by the webhook against the container runtime's image reference grammar; not compiled to CEL");
  if (t.spec.containers.length + t.spec.initContainers.length === 0) return no('no containers to inject');
  if (VALIDATING_NAMES.includes(t.name))
    return no(`its policy would be named as the validating policy ${policyName(t.name, namespace, revision)}: rename the template`);
  const fault = nameFault(t, namespace, revision) ?? celFault(t);
  if (fault !== undefined) return notCompiled(t, fault);
  return { template: t.name, compiles: true, detail: policyName(t.name, namespace, revision) };
}

/** A template's verdict for a fault of its own: the fault's one line, and TEMPLATE_NOT_COMPILED naming the template for the log. */
function notCompiled(t: CompiledTemplate, fault: string, cause?: unknown): PolicyVerdict {
  const error = new InjectorError('TEMPLATE_NOT_COMPILED', [t.name, fault], cause === undefined ? undefined : { cause });
  return { template: t.name, compiles: false, detail: fault, error };
}

/**
 * The first name of the template's objects that the apiserver would refuse: metadata.name of a
 * policy and of a binding, and a binding's policyName, are DNS-1123 subdomains of at most 253
 * characters (k8s.io/kubernetes pkg/apis/admissionregistration/validation, NameIsDNSSubdomain).
 */
function nameFault(t: CompiledTemplate, namespace: string | undefined, revision: string | undefined): string | undefined {
  const names = new Names(namespace === undefined ? { except: [] } : { namespace }, { namespace: '', ...(revision !== undefined && { revision }) });
  const policy = names.policy(t.name);
  const kind = 'MutatingAdmissionPolicyBinding';
  const bound =
    t.required !== undefined && enforcesRequired(names.options)
      ? [requiredBinding(kind, policy, undefined, names.scope, names)]
      : bindings(kind, policy, names.scope, names);
  const all = [policy, ...bound.map((b) => (b['metadata'] as { name: string }).name)];
  const bad = all.find((name) => !Formats['dns1123-subdomain'].test(name));
  if (bad === undefined) return undefined;
  return `/metadata/name: its objects would be named ${bad} (${bad.length} characters), and the apiserver accepts only DNS-1123 subdomains of at most 253; shorten the template's name`;
}

/**
 * The first value of the template with no CEL form (CEL_VALUE_UNWRITABLE), as `/json/path: why`:
 * each item written the way mutatingPolicy writes it (celObject, placeholderCel), at its path.
 */
function celFault(t: CompiledTemplate): string | undefined {
  const items: [string, readonly object[], string, Definition][] = [
    ['containers', t.spec.containers, 'Object.spec.containers', Definition.container],
    ['initContainers', t.spec.initContainers, 'Object.spec.initContainers', Definition.container],
    ['volumes', t.spec.volumes, 'Object.spec.volumes', Definition.volume],
    ['imagePullSecrets', t.spec.imagePullSecrets, 'Object.spec.imagePullSecrets', Definition.reference],
    ['env', t.spec.env, 'Object.spec.containers.env', Definition.env],
    ['volumeMounts', t.spec.volumeMounts, 'Object.spec.containers.volumeMounts', Definition.volumeMount],
  ];
  try {
    for (const [field, list, type, definition] of items)
      for (const [i, item] of list.entries()) celObject(item as Record<string, unknown>, type, definition, {}, `/spec/${field}/${i}`);
    for (const field of ['labels', 'annotations'] as const)
      for (const [key, value] of Object.entries(t.spec[field])) placeholderCel(value, `/spec/${field}/${escapeToken(key)}`);
    return undefined;
  } catch (err) {
    if (err instanceof InjectorError && err.code === 'CEL_VALUE_UNWRITABLE') return err.message;
    throw err;
  }
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
  const views = [isolated(set, '', () => compileView(set, { except: own.map(([ns]) => ns) }, options))];
  for (const [namespace, view] of own) views.push(compileNamespacePolicies(view, namespace, options));
  return {
    objects: views.flatMap((v) => v.objects),
    verdicts: views.flatMap((v) => v.verdicts),
    unsynced: views.flatMap((v) => v.unsynced),
  };
}

/** The policies of one namespace's view (setFor), bound to that namespace alone; the verdicts of its own templates (the cluster-wide ones' are the cluster-wide set's). */
export function compileNamespacePolicies(view: TemplateSet, namespace: string, options: PolicyOptions): PolicySet {
  const compiled = isolated(view, namespace, () => compileView(view, { namespace }, options));
  return { ...compiled, verdicts: compiled.verdicts.filter((v) => v.namespace === namespace) };
}

/**
 * A view compiled, or when its compile throws, nothing: each of its templates not compiled with
 * the reason, and its objects in the cluster left as they are (`unsynced`), so that the other
 * views still compile and sync.
 */
function isolated(set: TemplateSet, label: string, compile: () => PolicySet): PolicySet {
  try {
    return compile();
  } catch (err) {
    const why = `its view (${label === '' ? 'the cluster-wide templates' : `namespace ${label}`}) does not compile: ${(err as Error).message}`;
    const verdicts = [...set.templates.values()].map((t) => ({
      ...notCompiled(t, why, err),
      ...(label !== '' && t.namespace === label && { namespace: label }),
    }));
    return { objects: [], verdicts, unsynced: [label] };
  }
}

function compileView(set: TemplateSet, scope: Scope, options: PolicyOptions): PolicySet {
  // In name order, whatever order the store met the objects in: the same objects on every run and replica.
  const templates = [...set.templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  const verdicts = templates.map((t) => {
    const v = policyVerdict(t, 'namespace' in scope ? scope.namespace : undefined, options.revision);
    return t.namespace !== undefined && 'namespace' in scope && t.namespace === scope.namespace ? { ...v, namespace: t.namespace } : v;
  });
  const context = contextOf(set);
  const names = new Names(scope, options);
  const objects: Record<string, unknown>[] = [];
  const compiled: CompiledTemplate[] = [];
  for (const [i, t] of templates.entries()) {
    if (!verdicts[i]!.compiles) continue;
    const made = templateObjects(t, context, scope, names);
    if (made instanceof Error) {
      verdicts[i] = { ...verdicts[i]!, ...notCompiled(t, made.message, made) };
      continue;
    }
    objects.push(...made);
    compiled.push(t);
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
  return { objects, verdicts, unsynced: [] };
}

/**
 * The most bytes of a template's MutatingAdmissionPolicy as JSON, measured as it is written (its
 * template annotations included): the apiserver refuses a write over its 3 MiB request limit, etcd
 * an object over 1.5 MiB (its default), and a policy carries what its view's templates put into
 * pods, so one template of a view this large is not compiled, with the reason, rather than left to
 * fail at every sync (test/policy/compile.test.ts, "too large", "as it is written").
 */
const MAX_POLICY_BYTES = 1024 * 1024;

/** A template's MutatingAdmissionPolicy and its bindings as written (ofTemplate), or what its compile threw (or a policy over MAX_POLICY_BYTES): that template alone is then not compiled. */
function templateObjects(t: CompiledTemplate, context: SetContext, scope: Scope, names: Names): Record<string, unknown>[] | Error {
  try {
    const name = names.policy(t.name);
    const bound =
      t.required !== undefined && enforcesRequired(names.options)
        ? [requiredBinding('MutatingAdmissionPolicyBinding', name, t.required.namespaceSelector, scope, names)]
        : bindings('MutatingAdmissionPolicyBinding', name, scope, names);
    const made = [mutatingPolicy(t, name, context, names), ...bound].map((o) => ofTemplate(o, t));
    const bytes = Buffer.byteLength(JSON.stringify(made[0]));
    if (bytes > MAX_POLICY_BYTES)
      return new Error(
        `its MutatingAdmissionPolicy would hold ${bytes} bytes as JSON, over the ${MAX_POLICY_BYTES} a policy may hold here (etcd stores objects up to 1.5 MiB); make the template smaller`,
      );
    return made;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

/**
 * The most of a spec the source annotation holds: the apiserver refuses an object whose annotations
 * pass 256 KiB (TotalAnnotationSizeLimitB); a larger spec (only a file can be, a SidecarTemplate
 * object is at most 64 KiB) is left out, and its template's objects are held, not kept, by a
 * restarted injector (test/policy/compile.test.ts, "annotates each template's objects").
 */
const MAX_SOURCE_BYTES = 128 * 1024;

/** The object annotated with its template: its name, and on the MutatingAdmissionPolicy the spec as written. */
function ofTemplate(obj: Record<string, unknown>, t: CompiledTemplate): Record<string, unknown> {
  const metadata = obj['metadata'] as { annotations?: Record<string, string> };
  const source = obj['kind'] === 'MutatingAdmissionPolicy' ? JSON.stringify(t.source) : undefined;
  const annotations = {
    ...metadata.annotations,
    [PolicyAnnotations.template]: t.name,
    ...(source !== undefined && Buffer.byteLength(source) <= MAX_SOURCE_BYTES && { [PolicyAnnotations.source]: source }),
  };
  return { ...obj, metadata: { ...metadata, annotations } };
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
