import type { V1CronJob, V1DaemonSet, V1Deployment, V1Job, V1Namespace, V1Pod, V1ReplicaSet, V1StatefulSet } from '@kubernetes/client-node';
import { apiError, type KubeClients } from './client.js';

/** Where to list: one namespace, or every namespace (`-A`). */
export type Scope = { readonly namespace: string } | { readonly allNamespaces: true };

/** Objects per list page: big enough for few round trips, small enough that the apiserver answers each page quickly (kubectl uses 500). */
export const PAGE_SIZE = 500;

// Completed pods (a finished Job's) run no sidecar that could be out of date.
const LIVE_PODS = 'status.phase!=Succeeded,status.phase!=Failed';

/** The pods that are running or about to (not Succeeded or Failed), every page of them. */
export function listLivePods(kube: KubeClients, scope: Scope): Promise<V1Pod[]> {
  if ('namespace' in scope)
    return listAll('list pods', (page) => kube.core.listNamespacedPod({ namespace: scope.namespace, fieldSelector: LIVE_PODS, ...page }));
  return listAll('list pods', (page) => kube.core.listPodForAllNamespaces({ fieldSelector: LIVE_PODS, ...page }));
}

/** The ReplicaSets in scope: a Deployment's pods are owned by its ReplicaSet, which names the Deployment. */
export function listReplicaSets(kube: KubeClients, scope: Scope): Promise<V1ReplicaSet[]> {
  if ('namespace' in scope) return listAll('list replicasets', (page) => kube.apps.listNamespacedReplicaSet({ namespace: scope.namespace, ...page }));
  return listAll('list replicasets', (page) => kube.apps.listReplicaSetForAllNamespaces(page));
}

/** The Jobs in scope: a CronJob's pods are owned by its Job, which names the CronJob. */
export function listJobs(kube: KubeClients, scope: Scope): Promise<V1Job[]> {
  if ('namespace' in scope) return listAll('list jobs', (page) => kube.batch.listNamespacedJob({ namespace: scope.namespace, ...page }));
  return listAll('list jobs', (page) => kube.batch.listJobForAllNamespaces(page));
}

/** The Deployments in scope: the end of a ReplicaSet's owner chain, and the pod template `--restart` checks. */
export function listDeployments(kube: KubeClients, scope: Scope): Promise<V1Deployment[]> {
  if ('namespace' in scope) return listAll('list deployments', (page) => kube.apps.listNamespacedDeployment({ namespace: scope.namespace, ...page }));
  return listAll('list deployments', (page) => kube.apps.listDeploymentForAllNamespaces(page));
}

/** The StatefulSets in scope. */
export function listStatefulSets(kube: KubeClients, scope: Scope): Promise<V1StatefulSet[]> {
  if ('namespace' in scope) return listAll('list statefulsets', (page) => kube.apps.listNamespacedStatefulSet({ namespace: scope.namespace, ...page }));
  return listAll('list statefulsets', (page) => kube.apps.listStatefulSetForAllNamespaces(page));
}

/** The DaemonSets in scope. */
export function listDaemonSets(kube: KubeClients, scope: Scope): Promise<V1DaemonSet[]> {
  if ('namespace' in scope) return listAll('list daemonsets', (page) => kube.apps.listNamespacedDaemonSet({ namespace: scope.namespace, ...page }));
  return listAll('list daemonsets', (page) => kube.apps.listDaemonSetForAllNamespaces(page));
}

/** The CronJobs in scope: the end of a Job's owner chain. */
export function listCronJobs(kube: KubeClients, scope: Scope): Promise<V1CronJob[]> {
  if ('namespace' in scope) return listAll('list cronjobs', (page) => kube.batch.listNamespacedCronJob({ namespace: scope.namespace, ...page }));
  return listAll('list cronjobs', (page) => kube.batch.listCronJobForAllNamespaces(page));
}

/** The namespaces in scope, for their labels (the namespace opt-in): the one namespace (get), or every one (list). */
export async function listNamespaces(kube: KubeClients, scope: Scope): Promise<V1Namespace[]> {
  if ('namespace' in scope) {
    const one = await kube.core.readNamespace({ name: scope.namespace }).catch((err: unknown) => {
      throw apiError(`get namespace ${scope.namespace}`, err);
    });
    return [one];
  }
  return listAll('list namespaces', (page) => kube.core.listNamespace(page));
}

interface Page {
  readonly limit: number;
  readonly _continue?: string;
}

/** Follows `metadata.continue` until the last page (the API's chunked list, as kubectl get does). */
async function listAll<T>(call: string, list: (page: Page) => Promise<{ items: T[]; metadata?: { _continue?: string } }>): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  do {
    const page = await list({ limit: PAGE_SIZE, ...(token !== undefined && { _continue: token }) }).catch((err: unknown) => {
      throw apiError(call, err);
    });
    items.push(...page.items);
    token = page.metadata?._continue || undefined;
  } while (token !== undefined);
  return items;
}
