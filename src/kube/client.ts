import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, AppsV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { InjectorError } from '../errors.js';

/** Where the kubelet mounts a pod's ServiceAccount token, CA and namespace. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** How the client found its cluster. */
export const KubeSource = { kubeconfig: 'kubeconfig', inCluster: 'in-cluster', default: 'default' } as const;
export type KubeSource = (typeof KubeSource)[keyof typeof KubeSource];

/** The API groups the injector talks to, and the namespace it works in. */
export interface KubeClients {
  readonly core: CoreV1Api;
  readonly admission: AdmissionregistrationV1Api;
  /** ReplicaSets and Jobs, read by `drift` to find the workload that owns a pod. */
  readonly apps: AppsV1Api;
  readonly batch: BatchV1Api;
  /** SidecarTemplate objects: listed, watched, their status written. */
  readonly custom: CustomObjectsApi;
  /** The loaded configuration, for client-node's informer (makeInformer), which builds its own watch. */
  readonly config: KubeConfig;
  readonly namespace: string;
  readonly source: KubeSource;
  /** The API server URL, for logs and error messages. */
  readonly server: string;
}

export interface KubeClientOptions {
  /** A kubeconfig file; empty: the ServiceAccount when in a pod, else $KUBECONFIG or ~/.kube/config. */
  readonly kubeconfig: string;
  /** The namespace to work in; empty: the ServiceAccount's, then the kubeconfig context's, then `default`. */
  readonly namespace: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Prefix of the ServiceAccount files (tests point it at a temporary directory). */
  readonly serviceAccountPrefix?: string;
}

/** Builds the Kubernetes clients from a kubeconfig or the pod's ServiceAccount. Throws KUBE_CONFIG_INVALID. */
export function createKubeClients(opts: KubeClientOptions): KubeClients {
  const { config, source } = loadKubeConfig(opts);
  const server = config.getCurrentCluster()?.server;
  if (server === undefined || server === '') throw new InjectorError('KUBE_CONFIG_INVALID', [`${source}: no cluster server in the current context`]);
  return {
    core: config.makeApiClient(CoreV1Api),
    admission: config.makeApiClient(AdmissionregistrationV1Api),
    apps: config.makeApiClient(AppsV1Api),
    batch: config.makeApiClient(BatchV1Api),
    custom: config.makeApiClient(CustomObjectsApi),
    config,
    namespace: resolveNamespace(opts, config),
    source,
    server,
  };
}

function loadKubeConfig(opts: KubeClientOptions): { config: KubeConfig; source: KubeSource } {
  const env = opts.env ?? process.env;
  const config = new KubeConfig();
  try {
    if (opts.kubeconfig !== '') {
      config.loadFromFile(opts.kubeconfig);
      return { config, source: KubeSource.kubeconfig };
    }
    // Inside a pod the kubelet sets KUBERNETES_SERVICE_HOST; the ServiceAccount is the only identity
    // the RBAC in manifests/ grants anything to.
    if (env.KUBERNETES_SERVICE_HOST !== undefined && env.KUBERNETES_SERVICE_HOST !== '') {
      loadInCluster(config, env, `${opts.serviceAccountPrefix ?? ''}${SERVICE_ACCOUNT_DIR}`);
      return { config, source: KubeSource.inCluster };
    }
    // Without any kubeconfig client-node falls back to http://localhost:8080: whatever listens there
    // would be sent the injector's requests (Events, drift's lists), so no kubeconfig is an error.
    if ((env['KUBECONFIG'] ?? '') === '' && !existsSync(join(homedir(), '.kube', 'config'))) {
      throw new Error('no kubeconfig found ($KUBECONFIG is not set and ~/.kube/config does not exist)');
    }
    config.loadFromDefault();
    return { config, source: KubeSource.default };
  } catch (err) {
    if (err instanceof InjectorError) throw err;
    throw new InjectorError('KUBE_CONFIG_INVALID', [(err as Error).message], { cause: err });
  }
}

/**
 * KubeConfig.loadFromCluster with the environment passed in: the API server from
 * KUBERNETES_SERVICE_HOST/PORT, trust from the ServiceAccount's ca.crt, and its token re-read from the
 * file as the kubelet rotates it (client-node's tokenFile provider).
 */
function loadInCluster(config: KubeConfig, env: NodeJS.ProcessEnv, dir: string): void {
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${env.KUBERNETES_SERVICE_PORT ?? '443'}`;
  config.loadFromOptions({
    clusters: [{ name: 'inCluster', server, caFile: `${dir}/ca.crt`, skipTLSVerify: false }],
    users: [{ name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: `${dir}/token` } } }],
    contexts: [{ name: 'inClusterContext', cluster: 'inCluster', user: 'inClusterUser' }],
    currentContext: 'inClusterContext',
  });
}

function resolveNamespace(opts: KubeClientOptions, config: KubeConfig): string {
  if (opts.namespace !== '') return opts.namespace;
  const file = `${opts.serviceAccountPrefix ?? ''}${SERVICE_ACCOUNT_DIR}/namespace`;
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  return config.getContextObject(config.getCurrentContext())?.namespace ?? 'default';
}

/** The HTTP status of a failed API call, or undefined for a transport failure. */
export function apiStatus(err: unknown): number | undefined {
  // The typed clients' ApiException carries `code`; client-node's Watch rejects with an Error carrying `statusCode`.
  const { code, statusCode } = (err ?? {}) as { code?: unknown; statusCode?: unknown };
  if (typeof code === 'number') return code;
  return typeof statusCode === 'number' ? statusCode : undefined;
}

/** Wraps a failed API call as KUBE_API_FAILED, naming the call and the status. */
export function apiError(call: string, err: unknown): InjectorError {
  const status = apiStatus(err);
  const detail = status === undefined ? (err as Error).message : `HTTP ${status}: ${statusMessage(err)}`;
  return new InjectorError('KUBE_API_FAILED', [call, detail], { cause: err });
}

/** The API's one-line message of a failed call: its Status body's message, else the first line of the error. */
export function statusMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: string };
      if (typeof parsed.message === 'string') return parsed.message;
    } catch {
      return body.slice(0, 200);
    }
  }
  if (typeof body === 'object' && body !== null && typeof (body as { message?: unknown }).message === 'string') return (body as { message: string }).message;
  // A status the API description does not list (401, 403) comes without a body, as
  // "HTTP-Code: 401\nMessage: Unauthorized\nBody: ...": keep the one line that says what happened.
  const message = (err as Error).message;
  return /^Message: (.+)$/m.exec(message)?.[1] ?? message.split('\n')[0] ?? message;
}
