import { webhookCalls, type WebhookCall } from '../../src/kube/selectors.js';
import type { Labels, WebhookConfiguration } from '../../src/kube/types.js';

/**
 * A stand-in for the kube-apiserver's admission dispatch, for the webhook configurations a test
 * rendered (kustomize or helm): which webhooks a pod CREATE reaches, given the labels of its
 * namespace and its own. It evaluates rules, namespaceSelector and objectSelector as the apiserver
 * does (src/kube/selectors.ts, tested on its own against the apimachinery semantics).
 */
export interface AdmissionRouter {
  /** The webhooks called, mutating ones first. */
  calls(namespace: string, namespaceLabels: Labels, podLabels: Labels): WebhookCall[];
  /** Just their paths. */
  paths(namespace: string, namespaceLabels: Labels, podLabels: Labels): string[];
}

export function admissionRouter(objects: readonly Record<string, any>[]): AdmissionRouter {
  const configs = objects.filter((o) => o.kind === 'MutatingWebhookConfiguration' || o.kind === 'ValidatingWebhookConfiguration') as WebhookConfiguration[];
  if (configs.length === 0) throw new Error('no webhook configuration among the objects');
  const calls = (namespace: string, namespaceLabels: Labels, podLabels: Labels): WebhookCall[] =>
    webhookCalls({ namespace, namespaceLabels, podLabels }, configs);
  return { calls, paths: (ns, nsLabels, podLabels) => calls(ns, nsLabels, podLabels).map((c) => c.path) };
}
