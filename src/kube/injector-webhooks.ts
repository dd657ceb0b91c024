import { apiError, apiStatus, type KubeClients } from './client.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../generated/shipped-webhooks.js';
import type { Webhook, WebhookConfiguration } from './types.js';

/** The injector's mutating webhooks a cluster calls, and where they were read. */
export interface InjectorWebhooks {
  readonly configurations: readonly WebhookConfiguration[];
  /** For the report: the installed configurations' names, or the shipped file. */
  readonly source: string;
  /** Why the shipped configurations stand in for the installed ones, when they do. */
  readonly note?: string;
}

const SHIPPED = 'manifests/base/webhooks.yaml';

/**
 * The names of the injector's mutating webhooks: the same in the kustomize manifests and the Helm
 * chart; a revision adds each once more, prefixed `ns-revision.` (the namespace picks the revision).
 */
const SHIPPED_NAMES = SHIPPED_WEBHOOK_CONFIGURATIONS.filter((c) => c.kind === 'MutatingWebhookConfiguration').flatMap((c) => c.webhooks.map((w) => w.name));
const OURS: ReadonlySet<string> = new Set([...SHIPPED_NAMES, ...SHIPPED_NAMES.map((n) => `ns-revision.${n}`)]);

const REVISION_LABEL = 'sidecar-injector.io/rev';

/** The revision a webhook serves: the value its selectors require of sidecar-injector.io/rev; '' for the default install's. */
function webhookRevision(webhook: Webhook): string {
  const requirements = [...(webhook.objectSelector?.matchExpressions ?? []), ...(webhook.namespaceSelector?.matchExpressions ?? [])];
  const named = requirements.find((r) => r.key === REVISION_LABEL && r.operator === 'In');
  return named?.values?.[0] ?? '';
}

/**
 * The installed MutatingWebhookConfigurations' webhooks that are the injector's (by webhook name),
 * with their selectors as installed: a Helm release excludes other namespaces, or leaves out the
 * namespace opt-in. Only those of the install of `revision` ('' for the default install), told by
 * their sidecar-injector.io/rev selector (webhookRevision). Without the right to list them (HTTP 403), or with none installed, the shipped
 * configurations stand in, and the note says so.
 */
export async function injectorWebhooks(kube: KubeClients, revision = ''): Promise<InjectorWebhooks> {
  const shipped = (note: string): InjectorWebhooks => ({ configurations: SHIPPED_WEBHOOK_CONFIGURATIONS, source: SHIPPED, note });
  const list = await kube.admission.listMutatingWebhookConfiguration().catch((err: unknown) => {
    if (apiStatus(err) === 403) return undefined;
    throw apiError('list mutatingwebhookconfigurations', err);
  });
  if (list === undefined) return shipped(`cannot list mutatingwebhookconfigurations (HTTP 403): judging which pods are opted in by ${SHIPPED}`);
  const found = list.items
    .map((c): WebhookConfiguration => JSON.parse(JSON.stringify({ ...c, kind: 'MutatingWebhookConfiguration' })) as WebhookConfiguration)
    // Only the webhooks of the install asked for: each install takes its own pods.
    .map((c) => ({ ...c, webhooks: (c.webhooks ?? []).filter((w) => OURS.has(w.name) && webhookRevision(w) === revision) }))
    .filter((c) => c.webhooks.length > 0);
  if (found.length === 0)
    return shipped(
      `no MutatingWebhookConfiguration holds the injector's webhooks${revision === '' ? '' : ` of revision ${revision}`} (${SHIPPED_NAMES.join(', ')}): judging which pods are opted in by ${SHIPPED}`,
    );
  return { configurations: found, source: found.map((c) => `MutatingWebhookConfiguration ${c.metadata.name}`).join(', ') };
}
