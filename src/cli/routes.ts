import { parseAllDocuments } from 'yaml';
import { InjectorError } from '../errors.js';
import { NAMESPACE_NAME_LABEL, selectorMatches } from '../kube/selectors.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../kube/shipped-webhooks.js';
import { isObject, type LabelSelector, type Labels, type WebhookConfiguration } from '../kube/types.js';

/**
 * Which of the injector's webhooks the apiserver calls for a pod CREATE, decided as the apiserver
 * decides it (src/kube/selectors.ts): a webhook is called when its namespaceSelector matches the
 * labels of the pod's namespace and its objectSelector matches the pod's labels (for a validating
 * webhook, the labels of the pod after every mutation). `inject` and `explain` use the shipped
 * configurations, so they give the verdict a cluster installed from this repository gives.
 */

export type { Labels };

/** One webhook of the configurations, as far as routing goes. */
export interface Webhook {
  readonly name: string;
  readonly kind: 'mutating' | 'validating';
  /** clientConfig.service.path: the endpoint the review is sent to. */
  readonly path: string;
  readonly namespaceSelector?: LabelSelector;
  readonly objectSelector?: LabelSelector;
}

/** Where the shipped configurations come from (src/kube/shipped-webhooks.ts is generated from it); named in messages. */
export const SHIPPED_WEBHOOKS = 'manifests/base/webhooks.yaml';

/** The labels a namespace has: the automatic name label, plus those given (`--namespace-labels`). */
export function namespaceLabels(namespace: string, given: Labels = {}): Labels {
  return { ...given, [NAMESPACE_NAME_LABEL]: namespace };
}

/** The webhooks of `kind` that receive a pod CREATE in a namespace with these labels; the apiserver calls them in this order. */
export function receivingWebhooks(webhooks: readonly Webhook[], kind: Webhook['kind'], namespace: Labels, pod: Labels): Webhook[] {
  return webhooks.filter((w) => w.kind === kind && selectorMatches(w.namespaceSelector, namespace) && selectorMatches(w.objectSelector, pod));
}

/** True when some webhook's namespaceSelector takes pods of this namespace at all. */
export function namespaceReceives(webhooks: readonly Webhook[], namespace: Labels): boolean {
  return webhooks.some((w) => selectorMatches(w.namespaceSelector, namespace));
}

/** The webhooks of configurations, in order; one without a service path cannot be one of the injector's. */
export function webhooksOf(configurations: readonly WebhookConfiguration[], source: string): Webhook[] {
  return configurations.flatMap((config) =>
    (config.webhooks ?? []).map((w): Webhook => {
      const path = w.clientConfig.service?.path;
      if (path === undefined) throw new InjectorError('INPUT_INVALID', [source, `webhook ${w.name} has no clientConfig.service.path`]);
      return {
        name: w.name,
        kind: config.kind === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating',
        path,
        ...(w.namespaceSelector !== undefined && { namespaceSelector: w.namespaceSelector }),
        ...(w.objectSelector !== undefined && { objectSelector: w.objectSelector }),
      };
    }),
  );
}

/** Reads the webhooks of the Mutating- and ValidatingWebhookConfigurations in a YAML file (tests, other installs). */
export function parseWebhooks(text: string, source: string): Webhook[] {
  const configurations = parseAllDocuments(text)
    .map((doc) => doc.toJS() as unknown)
    .filter((v): v is WebhookConfiguration => isObject(v) && (v['kind'] === 'MutatingWebhookConfiguration' || v['kind'] === 'ValidatingWebhookConfiguration'));
  return webhooksOf(configurations, source);
}

/** The webhooks shipped with this copy of the injector (the typed copy of manifests/base/webhooks.yaml). */
export function shippedWebhooks(): Webhook[] {
  return webhooksOf(SHIPPED_WEBHOOK_CONFIGURATIONS, SHIPPED_WEBHOOKS);
}
