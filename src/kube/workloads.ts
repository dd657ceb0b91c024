import { PatchStrategy, setHeaderOptions, type V1DaemonSet, type V1Deployment, type V1StatefulSet } from '@kubernetes/client-node';
import { apiError, type KubeClients } from './client.js';

/** The workload kinds `drift --restart` rolls: the ones `kubectl rollout restart` supports. */
const RestartableKinds = ['Deployment', 'StatefulSet', 'DaemonSet'] as const;
export type RestartableKind = (typeof RestartableKinds)[number];

export function isRestartable(kind: string): kind is RestartableKind {
  return (RestartableKinds as readonly string[]).includes(kind);
}

/** One Deployment, StatefulSet or DaemonSet. */
export interface WorkloadKey {
  readonly namespace: string;
  readonly kind: RestartableKind;
  readonly name: string;
}

/** The workload as the apiserver returns it (client-node's model). */
export type Workload = V1Deployment | V1StatefulSet | V1DaemonSet;

/** The pod template annotation `kubectl rollout restart` sets; a changed template makes the controller replace every pod. */
const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';

/**
 * The patch `kubectl rollout restart` sends (kubectl's objectrestarter): a strategic merge patch
 * setting the template's restartedAt annotation to the time, RFC 3339 without fractions (Go's
 * time.RFC3339).
 */
export function restartPatch(at: Date): { spec: { template: { metadata: { annotations: Record<string, string> } } } } {
  return { spec: { template: { metadata: { annotations: { [RESTARTED_AT]: at.toISOString().replace(/\.\d+Z$/, 'Z') } } } } };
}

/** Reads a workload with its status (GET). */
export function readWorkload(kube: KubeClients, w: WorkloadKey): Promise<Workload> {
  const params = { name: w.name, namespace: w.namespace };
  const call = (): Promise<Workload> => {
    switch (w.kind) {
      case 'Deployment':
        return kube.apps.readNamespacedDeployment(params);
      case 'StatefulSet':
        return kube.apps.readNamespacedStatefulSet(params);
      case 'DaemonSet':
        return kube.apps.readNamespacedDaemonSet(params);
    }
  };
  return call().catch((err: unknown) => {
    throw apiError(`get ${w.kind.toLowerCase()} ${w.namespace}/${w.name}`, err);
  });
}

/** Sends `kubectl rollout restart`'s patch; client-node 1.x takes the patch type as the Content-Type header option. */
export function restartWorkload(kube: KubeClients, w: WorkloadKey, at: Date): Promise<Workload> {
  const params = { name: w.name, namespace: w.namespace, body: restartPatch(at) };
  const options = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
  const call = (): Promise<Workload> => {
    switch (w.kind) {
      case 'Deployment':
        return kube.apps.patchNamespacedDeployment(params, options);
      case 'StatefulSet':
        return kube.apps.patchNamespacedStatefulSet(params, options);
      case 'DaemonSet':
        return kube.apps.patchNamespacedDaemonSet(params, options);
    }
  };
  return call().catch((err: unknown) => {
    throw apiError(`patch ${w.kind.toLowerCase()} ${w.namespace}/${w.name}`, err);
  });
}
