import type { Container, LabelSelector, NamedItem, VolumeMount } from '../kube/types.js';
import { Keys } from '../inject/keys.js';
import { overrideKey } from '../templates/override-keys.js';
import { QUANTITY_PATTERN } from '../templates/schema.js';
import type { TemplateSet } from '../templates/load.js';
import { NativeSidecar, SERVICE_ACCOUNT_TOKEN_PATH, type CompiledTemplate } from '../templates/template.js';
import { escapeToken } from '../patch/pointer.js';
import { celObject, celString, Definition, placeholderCel } from './cel.js';

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

export const POLICY_API = 'admissionregistration.k8s.io/v1';
/** The API versions a MutatingAdmissionPolicy is written in: v1 (Kubernetes 1.36), v1beta1 (1.34 and 1.35 with the beta API on). */
export const PolicyApi = { v1: 'admissionregistration.k8s.io/v1', v1beta1: 'admissionregistration.k8s.io/v1beta1' } as const;
export type PolicyApi = (typeof PolicyApi)[keyof typeof PolicyApi];
const PREFIX = 'sidecar-injector';
/** The labels every compiled object carries: the sync lists and prunes by them. */
export const PolicyLabels = {
  managedBy: 'app.kubernetes.io/managed-by',
  policies: 'sidecar-injector.io/policies',
  namespace: 'sidecar-injector.io/template-namespace',
} as const;
const REVISION_LABEL = 'sidecar-injector.io/rev';
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** Whether a template compiles to a policy, and why not. */
export interface PolicyVerdict {
  readonly template: string;
  /** The namespace of a SidecarTemplate object of a namespace (not cluster-wide). */
  readonly namespace?: string;
  readonly compiles: boolean;
  /** The MutatingAdmissionPolicy's name when it compiles; why not otherwise. */
  readonly detail: string;
}

/** What the install mode adds around the policies. */
export interface PolicyOptions {
  /** The injector's namespace, never injected (as the webhook configurations exclude it). */
  readonly namespace: string;
  /**
   * The revision the policies belong to (`sidecar-injector.io/rev`): names suffixed `-<rev>`, and
   * bound, as the revision's webhook configurations are, to pods labelled with it and to pods
   * without the label in namespaces labelled with it. Absent: the default install, which leaves
   * both alone.
   */
  readonly revision?: string;
  /** The MutatingAdmissionPolicies' and their bindings' API version (default v1); the ValidatingAdmissionPolicy is always v1 (GA since 1.30). */
  readonly apiVersion?: PolicyApi;
  /**
   * Policies beside the webhook: the validating policies check only the templates that compile and
   * do not refuse a pod for selecting one that does not (the webhook injects it, and /validate checks it).
   */
  readonly hybrid?: boolean;
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
const Validating = { set: 'validate', required: 'validate-required' } as const;
const VALIDATING_NAMES: readonly string[] = Object.values(Validating);

/**
 * The volume of the pod's own ServiceAccount token, found by its mount in the pod's own containers
 * and then init containers (sidecars left out), as withPodToken finds it; "" when none mounts it.
 */
const POD_TOKEN = `((object.spec.containers + object.spec.?initContainers.orValue([])).filter(c, !(c.name in variables.sidecars)).map(c, c.?volumeMounts.orValue([]).filter(m, m.mountPath == ${celString(SERVICE_ACCOUNT_TOKEN_PATH)}).map(m, m.name)).flatten() + [""])[0]`;

/** `serviceAccountToken: true`: the template's containers mount the pod's token, where the pod has one (test/policy/parity-token.test.ts). */
function podToken(t: CompiledTemplate): boolean {
  return t.render({ namespace: 'default', podName: 'p', serviceAccountName: 'default', labels: {}, annotations: {} }).podToken === true;
}

/**
 * Where a view's policies apply: one namespace (a namespace's own view), or every namespace but
 * those with views of their own (the cluster-wide set).
 */
type Scope = { readonly namespace: string } | { readonly except: readonly string[] };

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
  objects.push(validatingPolicy(set, compiled, verdicts, context, validate, names), ...bindings('ValidatingAdmissionPolicyBinding', validate, scope, names));
  // The required templates are cluster-wide, the same in every view: one policy holds them everywhere.
  const held =
    enforcesRequired(options) && !('namespace' in scope) ? requiredPolicy(set.required ?? [], compiled, names.policy(Validating.required), names) : undefined;
  if (held !== undefined)
    objects.push(held, requiredBinding('ValidatingAdmissionPolicyBinding', names.policy(Validating.required), undefined, { except: [] }, names, 'all'));
  return { objects, verdicts };
}

/**
 * Whether the required templates are enforced on every pod of their namespaces, opted in or not, as
 * the required webhooks do: by the default install; a revision's policies add them to the pods
 * that opt in to the revision, as its webhook does.
 */
function enforcesRequired(options: PolicyOptions): boolean {
  return options.revision === undefined;
}

/** A policy's name: `sidecar-injector-<template>`, `.<namespace>` for a namespace's view, `-<revision>` for a revision. */
export function policyName(template: string, namespace?: string, revision?: string): string {
  return `${PREFIX}-${template}${namespace === undefined ? '' : `.${namespace}`}${revision === undefined ? '' : `-${revision}`}`;
}

/** The names, metadata and API versions of one view's objects. */
class Names {
  constructor(
    readonly scope: Scope,
    readonly options: PolicyOptions,
  ) {}

  policy(template: string): string {
    return policyName(template, 'namespace' in this.scope ? this.scope.namespace : undefined, this.options.revision);
  }

  apiVersion(kind: string): string {
    return kind.startsWith('Mutating') ? (this.options.apiVersion ?? POLICY_API) : POLICY_API;
  }

  metadata(name: string, annotations?: Readonly<Record<string, string>>): Record<string, unknown> {
    const labels = {
      [PolicyLabels.managedBy]: PREFIX,
      [PolicyLabels.policies]: this.options.revision ?? 'default',
      ...('namespace' in this.scope && { [PolicyLabels.namespace]: this.scope.namespace }),
    };
    return { name, labels, ...(annotations !== undefined && { annotations }) };
  }
}

/** What every template's policy knows of the others: their item names, to keep the webhook's order whichever policy runs first. */
interface SetContext {
  readonly defaults: readonly string[];
  /** The required templates, in name order. */
  readonly required: readonly CompiledTemplate[];
  /** Per template, the names of the containers it adds (containers and initContainers). */
  readonly containers: string;
  /** Per template placed first in containers / last: its container names. */
  readonly firstContainers: string;
  readonly lastContainers: string;
  /** Per template placed next to a named container: that container (where `last` puts them when the pod lacks it). */
  readonly anchors: string;
  /** Per template, the names of its items placed first in initContainers: its init containers, and its native sidecars unless placed next to a container. */
  readonly firstInit: string;
  /** Per template placed next to a container, its native sidecars in initContainers: of the templates native in every pod, and of those too that are native in Jobs' pods. */
  readonly anchoredNative: string;
  readonly anchoredNativeInJobs: string;
  readonly volumes: string;
  readonly pullSecrets: string;
  readonly env: string;
  readonly mounts: string;
}

function contextOf(set: TemplateSet): SetContext {
  const all = [...set.templates.values()];
  const map = (pick: (t: CompiledTemplate) => readonly string[]): string => `{${all.map((t) => `${celString(t.name)}: ${celList(pick(t))}`).join(', ')}}`;
  const names = (items: readonly { readonly name: string }[]): string[] => items.map((i) => i.name);
  const anchored = (...modes: NativeSidecar[]): string =>
    `{${all
      .filter((t) => typeof t.placement === 'object' && modes.includes(t.nativeMode))
      .map((t) => `${celString(t.name)}: ${celList(names(t.spec.containers))}`)
      .join(', ')}}`;
  return {
    defaults: set.defaults.map((t) => t.name),
    required: set.required ?? [],
    containers: map((t) => [...names(t.spec.initContainers), ...names(t.spec.containers)]),
    firstContainers: map((t) => (t.placement === 'first' ? names(t.spec.containers) : [])),
    lastContainers: map((t) => (t.placement === 'first' ? [] : names(t.spec.containers))),
    anchors: `{${all.flatMap((t) => (typeof t.placement === 'object' ? [`${celString(t.name)}: ${celString('before' in t.placement ? t.placement.before : t.placement.after)}`] : [])).join(', ')}}`,
    firstInit: map((t) => [...names(t.spec.initContainers), ...(typeof t.placement === 'object' ? [] : names(t.spec.containers))]),
    anchoredNative: anchored(NativeSidecar.Always),
    anchoredNativeInJobs: anchored(NativeSidecar.Always, NativeSidecar.JobsOnly),
    volumes: map((t) => names(t.spec.volumes)),
    pullSecrets: map((t) => names(t.spec.imagePullSecrets)),
    env: map((t) => names(t.spec.env)),
    mounts: map((t) => t.spec.volumeMounts.map((m) => m.mountPath)),
  };
}

const celList = (items: readonly string[]): string => `[${items.map(celString).join(', ')}]`;

// The selection, as selectTemplates makes it: the templates annotation (comma-separated, blanks
// ignored), else the default templates.
const REQUESTED = `object.metadata.?annotations[?${celString(Keys.templates)}].orValue("").split(",").map(n, n.trim()).filter(n, n != "")`;
/** The selection of an opted-in pod, as selectTemplates makes it: the pod's names, else the defaults, then each template required in its namespace that they lack. */
function selectedExpr(context: SetContext): string {
  const chosen = `(size(${REQUESTED}) > 0 ? ${REQUESTED} : ${celList(context.defaults)})`;
  if (context.required.length === 0) return chosen;
  return `(${chosen} + ${requiredHere(context)}.filter(r, !(r in ${chosen})))`;
}

/** The templates required in the pod's namespace, in name order (requiredFor). */
function requiredHere(context: SetContext): string {
  const cases = context.required.map((t) => `(r == ${celString(t.name)} && ${requiredIn(t.required?.namespaceSelector)})`);
  return `${celList(context.required.map((t) => t.name))}.filter(r, ${cases.join(' || ')})`;
}

/** A required template's namespaceSelector (on kubernetes.io/metadata.name alone, requiredSpecFaults) as CEL over request.namespace. */
function requiredIn(selector: LabelSelector | undefined): string {
  const terms = [
    ...Object.values(selector?.matchLabels ?? {}).map((v) => `request.namespace == ${celString(v)}`),
    ...(selector?.matchExpressions ?? []).map((r) =>
      r.operator === 'In'
        ? `request.namespace in ${celList(r.values ?? [])}`
        : r.operator === 'NotIn'
          ? `!(request.namespace in ${celList(r.values ?? [])})`
          : r.operator === 'Exists'
            ? 'true'
            : 'false',
    ),
  ];
  return terms.length === 0 ? 'true' : `(${terms.join(' && ')})`;
}

/**
 * Whether the default install's bindings take the pod (bindings, OPTED_IN): no revision label on
 * the pod or its namespace, and the pod labelled "true", or unlabelled in a namespace labelled "true".
 */
const OPTED_IN_BY_BINDINGS = [
  `!(${celString(REVISION_LABEL)} in object.metadata.?labels.orValue({}))`,
  `!(${celString(REVISION_LABEL)} in namespaceObject.metadata.?labels.orValue({}))`,
  `(object.metadata.?labels[?${celString(Keys.inject)}].orValue("") == "true" || (!(${celString(Keys.inject)} in object.metadata.?labels.orValue({})) && namespaceObject.metadata.?labels[?${celString(Keys.inject)}].orValue("") == "true"))`,
].join(' && ');

// Any value of the label but "true" opts the pod out (the namespace binding lets a pod without it in).
const OPTED_IN = `!has(object.metadata.labels) || !(${celString(Keys.inject)} in object.metadata.labels) || object.metadata.labels[${celString(Keys.inject)}] == "true"`;
// A pod of a Job (a CronJob's too), as isOwnedByJob decides.
const IN_JOB = `object.metadata.?ownerReferences.orValue([]).exists(o, o.kind == "Job" && o.apiVersion.startsWith("batch/"))`;

function matchConstraints(options: PolicyOptions): Record<string, unknown> {
  return {
    resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }],
    // As the webhook configurations: system namespaces and the injector's own are never matched.
    namespaceSelector: {
      matchExpressions: [
        { key: NAMESPACE_NAME_LABEL, operator: 'NotIn', values: ['kube-system', 'kube-public', 'kube-node-lease', options.namespace] },
        { key: 'runlevel', operator: 'NotIn', values: ['0', '1'] },
      ],
    },
  };
}

type Requirement = { readonly key: string; readonly operator: string; readonly values?: readonly string[] };

/**
 * The ways in, as the webhooks of the webhook configurations (test/policy/parity-cluster.test.ts
 * holds them to the revision's): the pod's label, or its namespace's (then any pod not labelled
 * otherwise). The default install leaves revision-labelled pods and namespaces alone; a revision
 * takes the pods labelled with it, and the pods without the label in namespaces labelled with it.
 * A namespace's view binds to that namespace by its name, the cluster-wide set to the others.
 */
function bindings(kind: string, policy: string, scope: Scope, names: Names): Record<string, unknown>[] {
  const revision = names.options.revision;
  const inScope: Requirement[] =
    'namespace' in scope
      ? [{ key: NAMESPACE_NAME_LABEL, operator: 'In', values: [scope.namespace] }]
      : scope.except.length > 0
        ? [{ key: NAMESPACE_NAME_LABEL, operator: 'NotIn', values: scope.except }]
        : [];
  const noRevision: Requirement = { key: REVISION_LABEL, operator: 'DoesNotExist' };
  const ofRevision: Requirement | undefined = revision === undefined ? undefined : { key: REVISION_LABEL, operator: 'In', values: [revision] };
  // [suffix, the pod's requirements, the namespace's]
  const ways: [string, Requirement[], Requirement[]][] =
    ofRevision === undefined
      ? [['', [noRevision], [noRevision]]]
      : [
          ['', [ofRevision], []],
          ['-ns-revision', [noRevision], [ofRevision]],
        ];
  const binding = (suffix: string, pod: Requirement[], namespace: Requirement[]): Record<string, unknown> => ({
    apiVersion: names.apiVersion(kind),
    kind,
    metadata: names.metadata(`${policy}-${suffix}`),
    spec: {
      policyName: policy,
      ...(kind === 'ValidatingAdmissionPolicyBinding' && { validationActions: ['Deny'] }),
      matchResources: { namespaceSelector: { matchExpressions: [...namespace, ...inScope] }, objectSelector: { matchExpressions: pod } },
    },
  });
  return ways.flatMap(([way, pod, namespace]) => [
    binding(
      `pod${way}`,
      [{ key: Keys.inject, operator: 'In', values: ['true'] }, ...pod],
      [{ key: Keys.inject, operator: 'NotIn', values: ['true'] }, ...namespace],
    ),
    binding(
      `namespace${way}`,
      [{ key: Keys.inject, operator: 'NotIn', values: ['false'] }, ...pod],
      [{ key: Keys.inject, operator: 'In', values: ['true'] }, ...namespace],
    ),
  ]);
}

/**
 * A required template's policy is bound to every pod of its namespaces (requiredBinding), as the
 * required webhooks are: a pod that opted in selects as /mutate selects (the template among the
 * others, in its order), any other pod gets the required templates alone, as /mutate/required
 * gives them (test/policy/parity-required.test.ts).
 */
function mutatingPolicy(t: CompiledTemplate, policy: string, context: SetContext, names: Names): Record<string, unknown> {
  const name = celString(t.name);
  const ops = (native: boolean): string => `(${patchGroups(t, native, context).join(' + ')})`;
  const patch = t.nativeMode === NativeSidecar.JobsOnly ? `(variables.inJob ? ${ops(true)} : ${ops(false)})` : ops(t.nativeMode === NativeSidecar.Always);
  const required = t.required !== undefined && enforcesRequired(names.options);
  const matchConditions = required
    ? [{ name: 'required-here', expression: requiredIn(t.required?.namespaceSelector) }]
    : [
        { name: 'opted-in', expression: OPTED_IN },
        { name: 'selected', expression: `${name} in ${selectedExpr(context)}` },
      ];
  const selected = required
    ? [
        { name: 'optedIn', expression: `${OPTED_IN_BY_BINDINGS} && (${OPTED_IN})` },
        { name: 'selected', expression: `variables.optedIn ? ${selectedExpr(context)} : ${requiredHere(context)}` },
      ]
    : [{ name: 'selected', expression: selectedExpr(context) }];
  return {
    apiVersion: names.apiVersion('MutatingAdmissionPolicy'),
    kind: 'MutatingAdmissionPolicy',
    metadata: names.metadata(policy, { 'sidecar-injector.io/template-version': t.version }),
    spec: {
      failurePolicy: 'Fail',
      // Re-run when a later policy or webhook changed the pod; every patch adds only what is missing, so a second run adds nothing.
      reinvocationPolicy: 'IfNeeded',
      matchConstraints: matchConstraints(names.options),
      matchConditions,
      variables: [
        ...selected,
        { name: 'inJob', expression: IN_JOB },
        // The selected templates before and after this one: their items stay ahead of (behind) this one's, as the webhook orders them.
        { name: 'earlier', expression: `lists.range(variables.selected.indexOf(${name})).map(i, variables.selected[i])` },
        { name: 'later', expression: `lists.range(size(variables.selected)).filter(i, i > variables.selected.indexOf(${name})).map(i, variables.selected[i])` },
        { name: 'names', expression: `object.spec.containers.map(c, c.name) + object.spec.?initContainers.orValue([]).map(c, c.name)` },
        { name: 'sidecars', expression: `variables.selected.filter(t, t in ${context.containers}).map(t, ${context.containers}[t]).flatten()` },
        { name: 'apps', expression: appsExpr(t) },
        ...(podToken(t) ? [{ name: 'podToken', expression: POD_TOKEN }] : []),
        ...overrideVariables(t),
      ],
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: patch } }],
    },
  };
}

/**
 * The one binding of a required template's policies: every pod of the namespaces its
 * namespaceSelector takes (of the view's scope), whatever its labels, as the required webhooks
 * take them (without their namespace label: with no webhook in the path, holding every pod costs
 * no availability). The system namespaces and the injector's stay out (matchConstraints).
 */
function requiredBinding(
  kind: string,
  policy: string,
  selector: LabelSelector | undefined,
  scope: Scope,
  names: Names,
  suffix = 'required',
): Record<string, unknown> {
  const inScope =
    'namespace' in scope
      ? [{ key: NAMESPACE_NAME_LABEL, operator: 'In', values: [scope.namespace] }]
      : scope.except.length > 0
        ? [{ key: NAMESPACE_NAME_LABEL, operator: 'NotIn', values: scope.except }]
        : [];
  return {
    apiVersion: names.apiVersion(kind),
    kind,
    metadata: names.metadata(`${policy}-${suffix}`),
    spec: {
      policyName: policy,
      ...(kind === 'ValidatingAdmissionPolicyBinding' && { validationActions: ['Deny'] }),
      matchResources: {
        namespaceSelector: {
          ...(selector?.matchLabels !== undefined && { matchLabels: selector.matchLabels }),
          matchExpressions: [...(selector?.matchExpressions ?? []), ...inScope],
        },
      },
    },
  };
}

/** Which of the pod's containers (by index) get the template's env and mounts: not sidecars, allowed by appContainers and the pod's annotation. */
function appsExpr(t: CompiledTemplate): string {
  const apps = t.render({ namespace: 'default', podName: 'p', serviceAccountName: 'default', labels: {}, annotations: {} }).appContainers;
  const annotation = `object.metadata.?annotations[?${celString(Keys.appContainers)}]`;
  const conditions = ['!(c.name in variables.sidecars)', `(!${annotation}.hasValue() || c.name in ${annotation}.value().split(",").map(n, n.trim()))`];
  if (apps?.include !== undefined) conditions.push(`c.name in ${celList(apps.include)}`);
  if (apps?.exclude !== undefined) conditions.push(`!(c.name in ${celList(apps.exclude)})`);
  return `object.spec.containers.transformList(i, c, ${conditions.join(' && ')}, i)`;
}

/** The JSON patch of one template as CEL lists of JSONPatch, to concatenate. */
function patchGroups(t: CompiledTemplate, native: boolean, context: SetContext): string[] {
  const groups: string[] = [];
  const sidecars = native ? t.spec.containers.map((c) => ({ ...c, restartPolicy: 'Always' })) : [];
  const anchored = typeof t.placement === 'object' ? t.placement : undefined;
  const init = [...t.spec.initContainers, ...(anchored === undefined ? sidecars : [])];
  const regular = native ? [] : t.spec.containers;
  if (init.length + sidecars.length > 0) groups.push(INIT_PARENT);
  // Native sidecars next to a named init container first: their index is read from the pod before
  // the insertions at the head (test/policy/parity-native-placement.test.ts).
  if (anchored !== undefined && sidecars.length > 0) {
    const byTemplate = `(variables.inJob ? ${context.anchoredNativeInJobs} : ${context.anchoredNative})`;
    const list = 'object.spec.?initContainers.orValue([])';
    const later = `variables.later.filter(t, t in ${byTemplate} && !(t in ${context.anchors} && ${context.anchors}[t] in ${list}.map(c, c.name))).map(t, ${byTemplate}[t]).flatten()`;
    groups.push(
      containerOps(
        'initContainers',
        sidecars,
        nextTo(
          anchored,
          list,
          tailOf(list, later, (item) => `${item}.name`),
        ),
        podFields(t),
      ),
    );
  }
  if (init.length > 0) groups.push(containerOps('initContainers', init, headIndex('initContainers', context.firstInit), podFields(t)));
  if (t.spec.volumes.length > 0)
    groups.push(namedOps('/spec/volumes', 'object.spec.?volumes.orValue([])', t.spec.volumes, 'Object.spec.volumes', Definition.volume, context.volumes));
  if (t.spec.imagePullSecrets.length > 0)
    groups.push(
      namedOps(
        '/spec/imagePullSecrets',
        'object.spec.?imagePullSecrets.orValue([])',
        t.spec.imagePullSecrets,
        'Object.spec.imagePullSecrets',
        Definition.reference,
        context.pullSecrets,
      ),
    );
  if (t.spec.env.length > 0)
    groups.push(appOps('env', t.spec.env, context.env, (e) => `!(${celString(e.name)} in c.?env.orValue([]).map(x, x.name))`, 'name', Definition.env));
  if (t.spec.volumeMounts.length > 0) {
    const absent = (m: NamedItem): string => {
      const mount = m as VolumeMount;
      return `!c.?volumeMounts.orValue([]).exists(x, x.name == ${celString(mount.name)} || x.mountPath == ${celString(mount.mountPath)})`;
    };
    groups.push(appOps('volumeMounts', t.spec.volumeMounts, context.mounts, absent, 'mountPath', Definition.volumeMount));
  }
  // After the env and mounts: their operations address the application containers by their index before any insertion.
  if (regular.length > 0) {
    // Ahead of the later templates placed last, and of those placed next to a container the pod lacks.
    const later = `variables.later.filter(t, t in ${context.lastContainers} && !(t in ${context.anchors} && ${context.anchors}[t] in variables.names)).map(t, ${context.lastContainers}[t]).flatten()`;
    const tail = tailOf('object.spec.containers', later, (item) => `${item}.name`);
    const at =
      t.placement === 'first'
        ? headIndex('containers', context.firstContainers)
        : typeof t.placement === 'object'
          ? nextTo(t.placement, 'object.spec.containers', tail)
          : tail;
    groups.push(containerOps('containers', regular, at, podFields(t)));
  }
  for (const [field, map] of [
    ['labels', t.spec.labels],
    ['annotations', t.spec.annotations],
  ] as const) {
    const keys = Object.entries(map);
    if (keys.length > 0) groups.push(keyOps(field, keys));
  }
  return groups.length === 0 ? ['[]'] : groups;
}

/**
 * Where this template's items go at the head of a list: after the leading run of items that belong
 * to the templates selected earlier (whichever policy ran first, the webhook's order results). The
 * pod's own items of such a name count too: see the known difference in docs/policies.md.
 */
function headIndex(field: 'containers' | 'initContainers', byTemplate: string): string {
  const list = `object.spec.?${field}.orValue([])`;
  const earlier = `variables.earlier.filter(t, t in ${byTemplate}).map(t, ${byTemplate}[t]).flatten()`;
  return headOf(list, earlier, (item) => `${item}.name`);
}

/** Where at the tail: ahead of the trailing run of items that belong to the templates selected later. */
function tailIndex(list: string, key: (item: string) => string, byTemplate: string): string {
  const later = `variables.later.filter(t, t in ${byTemplate}).map(t, ${byTemplate}[t]).flatten()`;
  return tailOf(list, later, key);
}

/** Before or after the named container, as placeItems puts it; where `last` would when the pod has none of that name. */
function nextTo(placement: { readonly before: string } | { readonly after: string }, list: string, tail: string): string {
  const index = `${list}.map(c, c.name).indexOf(${celString('before' in placement ? placement.before : placement.after)})`;
  return `(${index} >= 0 ? ${index}${'before' in placement ? '' : ' + 1'} : ${tail})`;
}

/** One past the last item of `list` whose key is not in `names` (0 when there is none): O(n). */
function tailOf(list: string, names: string, key: (item: string) => string): string {
  return `(lists.range(size(${list})).filter(k, !(${key(`${list}[k]`)} in ${names})).map(k, k + 1) + [0]).max()`;
}

/** The first item of `list` whose key is not in `names` (size when there is none): O(n). */
function headOf(list: string, names: string, key: (item: string) => string): string {
  return `(lists.range(size(${list})).filter(k, !(${key(`${list}[k]`)} in ${names})) + [size(${list})]).min()`;
}

/**
 * Each container the pod lacks by name (in either list), inserted at one index in reverse order so
 * that they keep the template's order there (a missing initContainers list is INIT_PARENT's). One value per
 * operation: the apiserver converts a typed object, not a list of them.
 */
function containerOps(field: 'containers' | 'initContainers', containers: readonly Container[], at: string, fields: PodFields): string {
  const type = `Object.spec.${field}`;
  const ops = [...containers]
    .reverse()
    .map(
      (c) =>
        `(${celString(c.name)} in variables.names ? [] : [JSONPatch{op: "add", path: "/spec/${field}/" + string(${at}), value: ${celObject(c, type, Definition.container, fields(c, type))}}])`,
    );
  return ops.join(' + ');
}

/** The fields of an added container that the pod decides, as CEL: its token mount, its first container's overridden requests. */
type PodFields = (c: Container, type: string) => Record<string, string>;

function podFields(t: CompiledTemplate): PodFields {
  const token = podToken(t);
  const first = t.spec.containers[0]?.name;
  const overrides = t.overrides.filter((f): f is QuantityOverride => f === 'cpu' || f === 'memory');
  return (c, type) => ({
    ...(token ? tokenMounts(c, type) : {}),
    ...(c.name === first && overrides.length > 0 ? { resources: overriddenResources(c, type, overrides) } : {}),
  });
}

type QuantityOverride = 'cpu' | 'memory';

/** The annotation value of an override, trimmed ("" when absent), and whether it is set and valid: a Kubernetes quantity above zero, as quantityRule checks it. */
function overrideVariables(t: CompiledTemplate): { name: string; expression: string }[] {
  return t.overrides
    .filter((f) => f === 'cpu' || f === 'memory')
    .flatMap((f) => {
      const annotation = `object.metadata.?annotations[?${celString(overrideKey(t.name, f))}]`;
      return [
        { name: f, expression: `${annotation}.orValue("").trim()` },
        { name: `${f}Set`, expression: `${annotation}.hasValue()` },
        {
          name: `${f}Ok`,
          expression: `variables.${f}Set && variables.${f}.matches(${celString(QUANTITY_PATTERN)}) && !variables.${f}.startsWith("-") && isQuantity(variables.${f}) && quantity(variables.${f}).isGreaterThan(quantity("0"))`,
        },
      ];
    });
}

/**
 * The first container's resources with the pod's valid overrides (withRequest): the request set,
 * a template limit below it raised to it. A request the template lacks is added only when overridden
 * (test/policy/parity-overrides.test.ts).
 */
function overriddenResources(c: Container, type: string, overrides: readonly QuantityOverride[]): string {
  const resources = (c['resources'] ?? {}) as { requests?: Record<string, string>; limits?: Record<string, string> };
  const requests = resources.requests ?? {};
  const limits = resources.limits;
  const overridden = (k: string): boolean => (overrides as readonly string[]).includes(k);
  const entries = [
    ...Object.entries(requests).map(([k, v]) =>
      overridden(k) ? `${celString(k)}: variables.${k}Ok ? variables.${k} : ${celString(v)}` : `${celString(k)}: ${celString(v)}`,
    ),
    ...overrides.filter((f) => !Object.hasOwn(requests, f)).map((f) => `?${celString(f)}: variables.${f}Ok ? optional.of(variables.${f}) : optional.none()`),
  ];
  const raised = (k: string, v: string): string =>
    overridden(k)
      ? `${celString(k)}: variables.${k}Ok && quantity(variables.${k}).isGreaterThan(quantity(${celString(v)})) ? variables.${k} : ${celString(v)}`
      : `${celString(k)}: ${celString(v)}`;
  const fields: Record<string, string> = { requests: `{${entries.join(', ')}}` };
  if (limits !== undefined)
    fields['limits'] = `{${Object.entries(limits)
      .map(([k, v]) => raised(k, v))
      .join(', ')}}`;
  return celObject(resources, `${type}.resources`, 'V1ResourceRequirements', fields);
}

/** The missing initContainers list, added before any insertion into it (once per policy). */
const INIT_PARENT = `(has(object.spec.initContainers) ? [] : [JSONPatch{op: "add", path: "/spec/initContainers", value: []}])`;

/**
 * A container's volumeMounts with the pod's token mount (withTokenMount), unless the template
 * mounts something at its path: the pod's volume is known per pod only.
 */
function tokenMounts(c: Container, type: string): Record<string, string> {
  const own = c.volumeMounts ?? [];
  if (own.some((m) => m.mountPath === SERVICE_ACCOUNT_TOKEN_PATH)) return {};
  const mount = `${type}.volumeMounts{name: variables.podToken, mountPath: ${celString(SERVICE_ACCOUNT_TOKEN_PATH)}, readOnly: true}`;
  const listed = `[${own.map((m) => celObject(m as unknown as Record<string, unknown>, `${type}.volumeMounts`, Definition.volumeMount)).join(', ')}]`;
  return { volumeMounts: `${listed} + (variables.podToken != "" ? [${mount}] : [])` };
}

/** Volumes or pull secrets the pod lacks by name, ahead of those of later templates. */
function namedOps(path: string, list: string, items: readonly NamedItem[], type: string, definition: Definition, byTemplate: string): string {
  const parent = `(has(object.spec.${path.split('/').pop()}) ? [] : [JSONPatch{op: "add", path: ${celString(path)}, value: []}])`;
  const at = tailIndex(list, (item) => `${item}.name`, byTemplate);
  const ops = [...items]
    .reverse()
    .map(
      (item) =>
        `(${list}.exists(x, x.name == ${celString(item.name)}) ? [] : [JSONPatch{op: "add", path: ${celString(`${path}/`)} + string(${at}), value: ${celObject(item, type, definition)}}])`,
    );
  return [parent, ...ops].join(' + ');
}

/** Env vars or mounts for each application container that lacks them. */
function appOps(
  field: 'env' | 'volumeMounts',
  items: readonly NamedItem[],
  byTemplate: string,
  absent: (item: NamedItem) => string,
  key: string,
  definition: Definition,
): string {
  const list = `c.?${field}.orValue([])`;
  const at = tailOf(list, `variables.later.filter(t, t in ${byTemplate}).map(t, ${byTemplate}[t]).flatten()`, (item) => `${item}.${key}`);
  const path = `"/spec/containers/" + string(i) + "/${field}"`;
  const parent = `(has(c.${field}) ? [] : [JSONPatch{op: "add", path: ${path}, value: []}])`;
  const ops = [...items]
    .reverse()
    .map(
      (item) =>
        `(${absent(item)} ? [JSONPatch{op: "add", path: ${path} + "/" + string(${at}), value: ${celObject(item, `Object.spec.containers.${field}`, definition)}}] : [])`,
    );
  return `object.spec.containers.transformList(i, c, i in variables.apps, ${[parent, ...ops].join(' + ')}).flatten()`;
}

/** Labels or annotations the pod lacks (its own value wins), with the map added when missing. */
function keyOps(field: 'labels' | 'annotations', entries: readonly (readonly [string, string])[]): string {
  const parent = `(has(object.metadata.${field}) ? [] : [JSONPatch{op: "add", path: "/metadata/${field}", value: {}}])`;
  const ops = entries.map(
    ([key, value]) =>
      `(has(object.metadata.${field}) && ${celString(key)} in object.metadata.${field} ? [] : [JSONPatch{op: "add", path: ${celString(`/metadata/${field}/${escapeToken(key)}`)}, value: ${placeholderCel(value)}}])`,
  );
  return [parent, ...ops].join(' + ');
}

/**
 * The counterpart of /validate: an opted-in pod that names an unknown template, selects one that
 * only the webhook can inject, or lacks a compiled template's containers (by name, native sidecars
 * in initContainers with restartPolicy Always) or volumes (by name), is refused.
 */
function validatingPolicy(
  set: TemplateSet,
  compiled: readonly CompiledTemplate[],
  verdicts: readonly PolicyVerdict[],
  context: SetContext,
  policy: string,
  names: Names,
): Record<string, unknown> {
  const known = [...set.templates.keys()].sort();
  // Beside the webhook (hybrid), a template it injects is its to check.
  const webhookOnly = names.options.hybrid === true ? [] : verdicts.filter((v) => !v.compiles).map((v) => v.template);
  const validations: Record<string, unknown>[] = [
    {
      expression: `variables.requested.all(n, n in ${celList(known)})`,
      messageExpression: `"unknown sidecar template(s) " + variables.requested.filter(n, !(n in ${celList(known)})).map(n, "\\"" + n + "\\"").join(", ") + " named in annotation ${Keys.templates}; known templates: ${known.join(', ')}"`,
      reason: 'Invalid',
    },
  ];
  if (webhookOnly.length > 0) {
    validations.push({
      expression: `!variables.selected.exists(n, n in ${celList(webhookOnly)})`,
      messageExpression: `"template(s) " + variables.selected.filter(n, n in ${celList(webhookOnly)}).join(", ") + " are injected by the webhook only (sidecar-injector lint --policies says why); install the webhook for them (mode hybrid)"`,
      reason: 'Invalid',
    });
  }
  // The required templates are held on every pod of their namespaces by their own policy (requiredPolicy).
  for (const t of compiled) if (t.required === undefined || !enforcesRequired(names.options)) validations.push(presence(t));
  for (const t of compiled) validations.push(...overrideChecks(t));
  return {
    apiVersion: POLICY_API,
    kind: 'ValidatingAdmissionPolicy',
    metadata: names.metadata(policy),
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(names.options),
      matchConditions: [{ name: 'opted-in', expression: OPTED_IN }],
      variables: [
        { name: 'requested', expression: REQUESTED },
        { name: 'selected', expression: selectedExpr(context) },
        { name: 'inJob', expression: IN_JOB },
      ],
      validations,
    },
  };
}

/** A selected template's cpu and memory overrides must be quantities above zero, as /mutate refuses them (OVERRIDE_REFUSED, quantityRule's words). */
function overrideChecks(t: CompiledTemplate): Record<string, unknown>[] {
  const examples = { cpu: '250m or 1', memory: '128Mi or 1Gi' } as const;
  return t.overrides
    .filter((f): f is QuantityOverride => f === 'cpu' || f === 'memory')
    .map((f) => {
      const key = overrideKey(t.name, f);
      const written = `object.metadata.annotations[${celString(key)}]`;
      const value = `${written}.trim()`;
      const quantityLike = `(${value}.matches(${celString(QUANTITY_PATTERN)}) && !${value}.startsWith("-") && isQuantity(${value}))`;
      return {
        expression: `!(${celString(t.name)} in variables.selected) || !(${celString(key)} in object.metadata.?annotations.orValue({})) || (${quantityLike} && quantity(${value}).isGreaterThan(quantity("0")))`,
        messageExpression: `${quantityLike} ? ${celString(`annotation ${key}: ${f} must be greater than zero`)} : ${celString(`annotation ${key}: "`)} + ${written} + ${celString(`" is not a Kubernetes quantity (for example ${examples[f]})`)}`,
        reason: 'Invalid',
      };
    });
}

/** What `t` adds that a pod must have, as [CEL that holds when it has it, what it is]. */
function checksOf(t: CompiledTemplate): [string, string][] {
  const regular = (n: string): string => `object.spec.containers.exists(c, c.name == ${celString(n)})`;
  const native = (n: string): string =>
    `object.spec.?initContainers.orValue([]).exists(c, c.name == ${celString(n)} && c.?restartPolicy.orValue("") == "Always")`;
  const init = (n: string): string => `object.spec.?initContainers.orValue([]).exists(c, c.name == ${celString(n)})`;
  const checks: [string, string][] = [];
  for (const c of t.spec.initContainers) checks.push([init(c.name), `init container "${c.name}"`]);
  for (const c of t.spec.containers) {
    const where =
      t.nativeMode === NativeSidecar.Always
        ? native(c.name)
        : t.nativeMode === NativeSidecar.JobsOnly
          ? `(variables.inJob ? ${native(c.name)} : ${regular(c.name)})`
          : regular(c.name);
    checks.push([where, `container "${c.name}"`]);
  }
  for (const v of t.spec.volumes) checks.push([`object.spec.?volumes.orValue([]).exists(v, v.name == ${celString(v.name)})`, `volume "${v.name}"`]);
  return checks;
}

/** The CEL list of what the pod lacks of `checks`, each named by `label`. */
function missingOf(checks: readonly [string, string][], label: (what: string) => string): string {
  return `[${checks.map(([ok, what]) => `${ok} ? "" : ${celString(label(what))}`).join(', ')}].filter(m, m != "")`;
}

function presence(t: CompiledTemplate): Record<string, unknown> {
  const checks = checksOf(t);
  const name = celString(t.name);
  return {
    expression: `!(${name} in variables.selected) || (${checks.map(([ok]) => ok).join(' && ')})`,
    messageExpression: `"pod opted in to sidecar injection but is missing: " + ${missingOf(checks, (what) => `${what} of template "${t.name}"`)}.join(", ")`,
    reason: 'Forbidden',
  };
}

/**
 * The counterpart of /validate/required, bound to every pod (requiredBinding): a pod of a namespace
 * where a template is required is refused without its containers and volumes, with what
 * REQUIRED_SIDECAR_MISSING says. A required template that does not compile refuses every pod of
 * its namespaces (the policies cannot add it, and do not let a pod run without it), unless the
 * webhook injects it beside the policies (hybrid).
 */
function requiredPolicy(
  required: readonly CompiledTemplate[],
  compiled: readonly CompiledTemplate[],
  policy: string,
  names: Names,
): Record<string, unknown> | undefined {
  const validations = required.flatMap((t) => {
    const here = requiredIn(t.required?.namespaceSelector);
    const why = `"template \\"${t.name}\\" is required " + ${t.required?.namespaceSelector === undefined ? '"in every namespace"' : '"in namespace " + request.namespace + " (its namespaceSelector takes it)"'} + " by the platform's spec.required"`;
    if (!compiled.includes(t)) {
      if (names.options.hybrid === true) return [];
      return [
        {
          expression: `!${here}`,
          messageExpression: `${why} + ", and it is injected by the webhook only (sidecar-injector lint --policies says why): install the webhook for it (mode hybrid)"`,
          reason: 'Forbidden',
        },
      ];
    }
    const checks = checksOf(t);
    return [
      {
        expression: `!${here} || (${checks.map(([ok]) => ok).join(' && ')})`,
        messageExpression: `${why} + ", and the pod lacks it (" + ${missingOf(checks, (what) => what)}.join(", ") + "); the MutatingAdmissionPolicy ${names.policy(t.name)} adds it at CREATE: check that it and its binding are installed"`,
        reason: 'Forbidden',
      },
    ];
  });
  // The apiserver refuses a policy without validations: none is written when nothing is held.
  if (validations.length === 0) return undefined;
  return {
    apiVersion: POLICY_API,
    kind: 'ValidatingAdmissionPolicy',
    metadata: names.metadata(policy),
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(names.options),
      variables: [{ name: 'inJob', expression: IN_JOB }],
      validations,
    },
  };
}
