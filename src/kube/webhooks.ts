import type { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { apiError, apiStatus } from './client.js';

/** What happened to one webhook configuration's caBundle. */
export const BundleState = { patched: 'patched', unchanged: 'unchanged', missing: 'missing' } as const;
export type BundleState = (typeof BundleState)[keyof typeof BundleState];

export interface PublishResult {
  readonly mutating: BundleState;
  readonly validating: BundleState;
}

/** True when every webhook of both configurations now trusts the bundle. */
export function isPublished(r: PublishResult): boolean {
  return r.mutating !== BundleState.missing && r.validating !== BundleState.missing;
}

interface WebhookList {
  readonly metadata?: { readonly resourceVersion?: string };
  readonly webhooks?: readonly { readonly name: string; readonly clientConfig: { readonly caBundle?: string } }[];
}

type Kind = {
  readonly label: string;
  read(api: AdmissionregistrationV1Api, name: string): Promise<WebhookList>;
  patch(api: AdmissionregistrationV1Api, name: string, body: object[]): Promise<unknown>;
};

const Kinds = {
  mutating: {
    label: 'mutatingwebhookconfigurations',
    read: (api, name) => api.readMutatingWebhookConfiguration({ name }),
    patch: (api, name, body) => api.patchMutatingWebhookConfiguration({ name, body }),
  },
  validating: {
    label: 'validatingwebhookconfigurations',
    read: (api, name) => api.readValidatingWebhookConfiguration({ name }),
    patch: (api, name, body) => api.patchValidatingWebhookConfiguration({ name, body }),
  },
} as const satisfies Record<keyof PublishResult, Kind>;

/** Attempts per configuration when a concurrent writer makes the guarded patch fail. */
const ATTEMPTS = 4;

/**
 * Sets `caBundle` (PEM, possibly several CAs) on every webhook of the Mutating- and
 * ValidatingWebhookConfiguration named `name`, patching only those that differ. A configuration
 * that does not exist yet (kustomize applies webhook configurations last) is reported as missing.
 */
export async function publishCaBundle(api: AdmissionregistrationV1Api, name: string, caBundlePem: string): Promise<PublishResult> {
  const encoded = Buffer.from(caBundlePem, 'utf8').toString('base64');
  const [mutating, validating] = await Promise.all([publishOne(api, Kinds.mutating, name, encoded), publishOne(api, Kinds.validating, name, encoded)]);
  return { mutating, validating };
}

async function publishOne(api: AdmissionregistrationV1Api, kind: Kind, name: string, encoded: string): Promise<BundleState> {
  const where = `${kind.label}/${name}`;
  for (let attempt = 1; ; attempt++) {
    let current: WebhookList;
    try {
      current = await kind.read(api, name);
    } catch (err) {
      if (apiStatus(err) === 404) return BundleState.missing;
      throw apiError(`GET ${where}`, err);
    }
    const ops = bundleOps(current, encoded);
    if (ops.length === 0) return BundleState.unchanged;
    try {
      await kind.patch(api, name, ops);
      return BundleState.patched;
    } catch (err) {
      // The `test` ops fail (422) or the resourceVersion moved (409) when someone reordered or
      // edited the webhooks in between: read again rather than write a caBundle to the wrong entry.
      const status = apiStatus(err);
      if ((status === 409 || status === 422) && attempt < ATTEMPTS) continue;
      if (status === 404) return BundleState.missing;
      throw apiError(`PATCH ${where}`, err);
    }
  }
}

/** A JSON patch guarded by the resourceVersion and each webhook's name, setting the differing caBundles. */
export function bundleOps(config: WebhookList, encoded: string): object[] {
  const ops: object[] = [];
  (config.webhooks ?? []).forEach((hook, i) => {
    if (hook.clientConfig.caBundle === encoded) return;
    ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: hook.name });
    // `add` sets or overwrites an object member, and caBundle is absent while it is empty.
    ops.push({ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: encoded });
  });
  if (ops.length === 0) return ops;
  const rv = config.metadata?.resourceVersion;
  return rv === undefined ? ops : [{ op: 'test', path: '/metadata/resourceVersion', value: rv }, ...ops];
}
