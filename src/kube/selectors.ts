import { injectorError } from '../errors.js';
import {
  SelectorOperator,
  type LabelSelector,
  type LabelSelectorRequirement,
  type Labels,
  type Webhook,
  type WebhookConfiguration,
  type WebhookRule,
} from './types.js';

/**
 * What the kube-apiserver decides before it calls a webhook: whether a pod CREATE matches a
 * webhook's rules, namespaceSelector and objectSelector. Pure (no I/O), so the CLI can say which
 * of the shipped webhooks a pod would reach, given its namespace's labels.
 */

/** The namespace a pod is created in: its name and labels. */
export interface PodNamespace {
  readonly namespace: string;
  readonly namespaceLabels?: Labels;
}

/** A pod being created: its namespace and its own labels. */
export interface PodCreate extends PodNamespace {
  readonly podLabels?: Labels;
}

/** One webhook the apiserver would call for the pod, in the order it calls them. */
export interface WebhookCall {
  readonly configuration: WebhookConfiguration['kind'];
  readonly webhook: string;
  /** The service path (`/mutate`, `/validate/namespace`, ...), or the URL of a url-based webhook. */
  readonly path: string;
  readonly failurePolicy: string;
}

/** The namespace label the apiserver sets on every namespace (Kubernetes >= 1.21, NamespaceDefaultLabelName); it cannot be changed. */
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/**
 * Whether `labels` satisfy `selector`, with metav1.LabelSelectorAsSelector's semantics: every
 * matchLabels pair and every expression must hold; an empty or absent selector matches everything
 * (a webhook's selectors default to {}). NotIn and DoesNotExist hold for an absent key. Throws
 * SELECTOR_INVALID for what the API server's validation would refuse (In/NotIn without values,
 * Exists/DoesNotExist with values, an unknown operator).
 */
export function selectorMatches(selector: LabelSelector | undefined, labels: Labels): boolean {
  if (selector === undefined) return true;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  return (selector.matchExpressions ?? []).every((r) => requirementHolds(r, labels));
}

function requirementHolds(r: LabelSelectorRequirement, labels: Labels): boolean {
  const values = r.values ?? [];
  const has = Object.hasOwn(labels, r.key);
  switch (r.operator) {
    case SelectorOperator.In:
      if (values.length === 0) throw injectorError('SELECTOR_INVALID', r.key, 'operator In needs at least one value');
      return has && values.includes(labels[r.key]!);
    case SelectorOperator.NotIn:
      if (values.length === 0) throw injectorError('SELECTOR_INVALID', r.key, 'operator NotIn needs at least one value');
      return !has || !values.includes(labels[r.key]!);
    case SelectorOperator.Exists:
      if (values.length > 0) throw injectorError('SELECTOR_INVALID', r.key, 'operator Exists takes no values');
      return has;
    case SelectorOperator.DoesNotExist:
      if (values.length > 0) throw injectorError('SELECTOR_INVALID', r.key, 'operator DoesNotExist takes no values');
      return !has;
    default:
      throw injectorError('SELECTOR_INVALID', r.key, `unknown operator ${JSON.stringify(r.operator)}`);
  }
}

/** Whether one of the rules covers CREATE of core/v1 pods (a namespaced resource); `*` matches anything. */
function coversPodCreate(rules: readonly WebhookRule[]): boolean {
  const has = (list: readonly string[] | undefined, want: string): boolean => (list ?? []).some((v) => v === want || v === '*');
  return rules.some(
    (r) =>
      has(r.operations, 'CREATE') &&
      has(r.apiGroups, '') &&
      has(r.apiVersions, 'v1') &&
      has(r.resources, 'pods') &&
      (r.scope === undefined || r.scope === '*' || r.scope === 'Namespaced'),
  );
}

interface Candidate {
  readonly configuration: WebhookConfiguration['kind'];
  readonly hook: Webhook;
}

/**
 * The webhooks whose rules cover a pod CREATE and whose namespaceSelector takes the pod's
 * namespace, in the apiserver's order: mutating ones first, in their order, then validating ones.
 * The namespace carries the apiserver's own name label whatever `namespaceLabels` say.
 */
function namespaceCandidates(pod: PodNamespace, configurations: readonly WebhookConfiguration[]): Candidate[] {
  const nsLabels: Labels = { ...pod.namespaceLabels, [NAMESPACE_NAME_LABEL]: pod.namespace };
  return (['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'] as const).flatMap((kind) =>
    configurations
      .filter((c) => c.kind === kind)
      .flatMap((c) => c.webhooks ?? [])
      .filter((hook) => coversPodCreate(hook.rules ?? []) && selectorMatches(hook.namespaceSelector, nsLabels))
      .map((hook) => ({ configuration: kind, hook })),
  );
}

function callOf({ configuration, hook }: Candidate): WebhookCall {
  // failurePolicy defaults to Fail in admissionregistration/v1.
  return {
    configuration,
    webhook: hook.name,
    path: hook.clientConfig.service?.path ?? hook.clientConfig.url ?? '/',
    failurePolicy: hook.failurePolicy ?? 'Fail',
  };
}

/** The webhooks of `configurations` the apiserver calls for `pod`'s CREATE, in the order it calls them. */
export function webhookCalls(pod: PodCreate, configurations: readonly WebhookConfiguration[]): WebhookCall[] {
  const podLabels = pod.podLabels ?? {};
  return namespaceCandidates(pod, configurations)
    .filter((c) => selectorMatches(c.hook.objectSelector, podLabels))
    .map(callOf);
}

/**
 * The webhooks that would be called for some pod of this namespace: those whose rules and
 * namespaceSelector take it, whatever their objectSelector says. None means the namespace is
 * excluded whatever labels its pods carry.
 */
export function namespaceCalls(pod: PodNamespace, configurations: readonly WebhookConfiguration[]): WebhookCall[] {
  return namespaceCandidates(pod, configurations).map(callOf);
}
