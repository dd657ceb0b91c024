import { apiError, apiStatus, type KubeClients } from './client.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../generated/shipped-webhooks.js';
import type { WebhookConfiguration } from './types.js';

/** The injector's mutating webhooks a cluster calls, and where they were read. */
export interface InjectorWebhooks {
  readonly configurations: readonly WebhookConfiguration[];
  /** For the report: the installed configurations' names, or the shipped file. */
  readonly source: string;
  /** Why the shipped configurations stand in for the installed ones, when they do. */
  readonly note?: string;
}

const SHIPPED = 'manifests/base/webhooks.yaml';

/** The names of the injector's mutating webhooks: the same in the kustomize manifests and the Helm chart. */
const OURS: ReadonlySet<string> = new Set(SHIPPED_WEBHOOK_CONFIGURATIONS.filter((c) => c.kind === 'MutatingWebhookConfiguration').flatMap((c) => c.webhooks.map((w) => w.name)));

/**
 * The installed MutatingWebhookConfigurations' webhooks that are the injector's (by webhook name),
 * with their selectors as installed: a Helm release excludes other namespaces, or leaves out the
 * namespace opt-in. Without the right to list them (HTTP 403), or with none installed, the shipped
 * configurations stand in, and the note says so.
 */
export async function injectorWebhooks(kube: KubeClients): Promise<InjectorWebhooks> {
  const shipped = (note: string): InjectorWebhooks => ({ configurations: SHIPPED_WEBHOOK_CONFIGURATIONS, source: SHIPPED, note });
  const list = await kube.admission.listMutatingWebhookConfiguration().catch((err: unknown) => {
    if (apiStatus(err) === 403) return undefined;
    throw apiError('list mutatingwebhookconfigurations', err);
  });
  if (list === undefined) return shipped(`cannot list mutatingwebhookconfigurations (HTTP 403): judging which pods are opted in by ${SHIPPED}`);
  const found = list.items
    .map((c): WebhookConfiguration => JSON.parse(JSON.stringify({ ...c, kind: 'MutatingWebhookConfiguration' })) as WebhookConfiguration)
    .map((c) => ({ ...c, webhooks: (c.webhooks ?? []).filter((w) => OURS.has(w.name)) }))
    .filter((c) => c.webhooks.length > 0);
  if (found.length === 0) return shipped(`no MutatingWebhookConfiguration holds the injector's webhooks (${[...OURS].join(', ')}): judging which pods are opted in by ${SHIPPED}`);
  return { configurations: found, source: found.map((c) => `MutatingWebhookConfiguration ${c.metadata.name}`).join(', ') };
}
