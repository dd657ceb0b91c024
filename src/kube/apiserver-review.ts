import { managedFieldsOf } from './managed-fields.js';
import type { Pod } from './types.js';

/** What the review of a pod's CREATE depends on: the pod, its namespace, and the kind of its creator (`Pod` for a bare pod). */
export interface ReviewSite {
  readonly kind: string;
  readonly pod: Pod;
  readonly namespace: string;
}

/**
 * The AdmissionReview text the apiserver would send for the pod's CREATE: the fields of
 * admission/v1's AdmissionRequest in its Go order, a uid of a UUID's length, and the pod with the
 * managedFields of its creator (kube-controller-manager for a controller's pod, kubectl for a
 * bare one). With `mutated`, the review a validating webhook receives: the pod as mutated, with
 * the managedFields of the pod as created, which the apiserver writes before mutating admission.
 */
export function apiserverReview(site: ReviewSite, mutated: Pod = site.pod): string {
  const manager = site.kind === 'Pod' ? 'kubectl-client-side-apply' : 'kube-controller-manager';
  const object = { ...mutated, metadata: { ...mutated.metadata, managedFields: [managedFieldsOf(site.pod as Record<string, unknown>, manager)] } };
  const gvk = { group: '', version: 'v1', kind: 'Pod' };
  const gvr = { group: '', version: 'v1', resource: 'pods' };
  const request = {
    uid: '00000000-0000-0000-0000-000000000000',
    kind: gvk,
    resource: gvr,
    requestKind: gvk,
    requestResource: gvr,
    namespace: site.namespace,
    operation: 'CREATE',
    userInfo: { username: `system:serviceaccount:kube-system:${manager}`, groups: ['system:serviceaccounts', 'system:authenticated'] },
    object,
    oldObject: null,
    dryRun: false,
    options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' },
  };
  return JSON.stringify({ kind: 'AdmissionReview', apiVersion: 'admission.k8s.io/v1', request });
}
