import type { PodLimits } from './bounds.js';
import { Keys } from '../inject/keys.js';
import type { LabelSelector } from '../kube/types.js';

/**
 * Where the compiled objects apply and what they are called: their names, labels and API versions,
 * the resources they match, and their bindings (the ways a pod opts in, as the webhook
 * configurations' webhooks), per view of the templates (compile.ts).
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
export const REVISION_LABEL = 'sidecar-injector.io/rev';
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** What the install mode adds around the policies. */
export interface PolicyOptions {
  /** The injector's namespace, never injected (as the webhook configurations exclude it). */
  readonly namespace: string;
  /**
   * The revision the policies belong to (`sidecar-injector.io/rev`): names `sidecar-injector.rev.<rev>.<template>` (Names), and
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
  /** The webhook's --max-* limits the policies bound the pod by (bounds.ts); default: the flags' defaults. */
  readonly limits?: PodLimits;
}

/**
 * Where a view's policies apply: one namespace (a namespace's own view), or every namespace but
 * those with views of their own (the cluster-wide set).
 */
export type Scope = { readonly namespace: string } | { readonly except: readonly string[] };

/**
 * Whether the required templates are enforced on every pod of their namespaces, opted in or not, as
 * the required webhooks do: by the default install; a revision's policies add them to the pods
 * that opt in to the revision, as its webhook does.
 */
export function enforcesRequired(options: PolicyOptions): boolean {
  return options.revision === undefined;
}

/**
 * A policy's name: `sidecar-injector-<template>` for the default install's cluster-wide set;
 * otherwise `sidecar-injector.<kind>.<revision and/or namespace>.<template>`, kind `ns`, `rev` or
 * `rev-ns`. A template name is a DNS subdomain (it may hold `-` and `.`), a revision and a
 * namespace are DNS labels (no `.`): the kind fixes how many labels precede the template, so no two
 * (template, namespace, revision) share a name, and none of these shares the default's
 * `sidecar-injector-` (test/policy/compile.test.ts 'names').
 */
export function policyName(template: string, namespace?: string, revision?: string): string {
  if (namespace === undefined && revision === undefined) return `${PREFIX}-${template}`;
  const kind = revision === undefined ? 'ns' : namespace === undefined ? 'rev' : 'rev-ns';
  return [PREFIX, kind, ...(revision === undefined ? [] : [revision]), ...(namespace === undefined ? [] : [namespace]), template].join('.');
}

/** The names, metadata and API versions of one view's objects. */
export class Names {
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

/** The pod requests a policy sees: CREATE, and for the required templates' validating policy UPDATE too. */
export function matchConstraints(options: PolicyOptions, operations: readonly string[] = ['CREATE']): Record<string, unknown> {
  return {
    resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations, resources: ['pods'], scope: 'Namespaced' }],
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
export function bindings(kind: string, policy: string, scope: Scope, names: Names): Record<string, unknown>[] {
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
 * The one binding of a required template's policies: every pod of the namespaces its
 * namespaceSelector takes (of the view's scope), whatever its labels, as the required webhooks
 * take them (without their namespace label: with no webhook in the path, holding every pod costs
 * no availability). The system namespaces and the injector's stay out (matchConstraints).
 */
export function requiredBinding(
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
