import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { apiError, apiStatus } from './client.js';

/** A Secret as the injector reads it: decoded data, annotations and the version to write against. */
export interface StoredSecret {
  readonly data: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly resourceVersion: string;
}

/** What a write wants stored. */
export interface SecretContent {
  readonly data: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

/** A write either lands or loses a race (409: the name exists, or the resourceVersion is stale). */
export type WriteResult = { readonly ok: true; readonly secret: StoredSecret } | { readonly ok: false; readonly conflict: true };

/** One named Secret, read and written with the API server's optimistic concurrency. */
export interface SecretStore {
  readonly name: string;
  readonly namespace: string;
  /** The Secret, or undefined when it does not exist. */
  read(): Promise<StoredSecret | undefined>;
  /** Creates it; a conflict means another writer created it first. */
  create(content: SecretContent): Promise<WriteResult>;
  /** Replaces `previous`; a conflict means someone wrote it since `previous` was read. */
  replace(previous: StoredSecret, content: SecretContent): Promise<WriteResult>;
}

/** The label every object the injector writes carries, so `kubectl get -l` finds them. */
const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'sidecar-injector' } as const;

/** A SecretStore for `namespace/name` through the CoreV1 API. */
export function createSecretStore(core: CoreV1Api, namespace: string, name: string): SecretStore {
  const where = `secrets/${namespace}/${name}`;
  return {
    name,
    namespace,
    async read() {
      try {
        return decode(await core.readNamespacedSecret({ name, namespace }));
      } catch (err) {
        if (apiStatus(err) === 404) return undefined;
        throw apiError(`GET ${where}`, err);
      }
    },
    async create(content) {
      try {
        return { ok: true, secret: decode(await core.createNamespacedSecret({ namespace, body: encode(name, namespace, content) })) };
      } catch (err) {
        if (apiStatus(err) === 409) return { ok: false, conflict: true };
        throw apiError(`POST ${where}`, err);
      }
    },
    async replace(previous, content) {
      // A PUT carrying the resourceVersion that was read is refused with 409 Conflict when anyone
      // wrote in between: the API server's compare-and-swap.
      const body = encode(name, namespace, content, previous.resourceVersion);
      try {
        return { ok: true, secret: decode(await core.replaceNamespacedSecret({ name, namespace, body })) };
      } catch (err) {
        const status = apiStatus(err);
        if (status === 409 || status === 404) return { ok: false, conflict: true };
        throw apiError(`PUT ${where}`, err);
      }
    },
  };
}

function encode(name: string, namespace: string, content: SecretContent, resourceVersion?: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/tls',
    metadata: {
      name,
      namespace,
      labels: { ...MANAGED_BY },
      annotations: { ...content.annotations },
      ...(resourceVersion !== undefined && { resourceVersion }),
    },
    data: Object.fromEntries(Object.entries(content.data).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')])),
  };
}

function decode(secret: V1Secret): StoredSecret {
  return {
    data: Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])),
    annotations: { ...secret.metadata?.annotations },
    resourceVersion: secret.metadata?.resourceVersion ?? '',
  };
}
