import { randomUUID } from 'node:crypto';
import type { ReviewRequest } from '../../src/admission/codec.js';
import { mutating, validating } from '../../src/admission/handlers.js';
import type { Verdict } from '../../src/admission/verdict.js';
import type { OptInScope } from '../../src/inject/policy.js';
import type { TemplateSet } from '../../src/templates/load.js';

/**
 * Builds the AdmissionReview a kube-apiserver sends for a pod CREATE, with its fields in the
 * apiserver's order (Go's encoding/json follows the struct: kind, apiVersion, request.uid first),
 * so JSON.stringify of it is the text the apiserver sends and the answer cache sees it as such.
 */
export function podReview(pod: object, opts: { apiVersion?: string; namespace?: string; operation?: string; uid?: string } = {}): any {
  return {
    kind: 'AdmissionReview',
    apiVersion: opts.apiVersion ?? 'admission.k8s.io/v1',
    request: {
      uid: opts.uid ?? randomUUID(),
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      namespace: opts.namespace ?? 'default',
      operation: opts.operation ?? 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller', groups: ['system:serviceaccounts', 'system:authenticated'] },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
}

/** Decodes the base64 JSON patch of an AdmissionResponse; [] when there is none. */
export function decodePatch(response: { patch?: string; patchType?: string }): any[] {
  if (response.patch === undefined) return [];
  return JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8'));
}

/** A pod that opted in, with the given extra labels and annotations. */
export function optedInPod(extra: { annotations?: Record<string, string>; labels?: Record<string, string>; name?: string; spec?: object } = {}): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...(extra.name === undefined ? { generateName: 'web-7c9f8b6d4-' } : { name: extra.name }),
      labels: { app: 'web', 'sidecar-injector.io/inject': 'true', ...extra.labels },
      ...(extra.annotations && { annotations: extra.annotations }),
    },
    spec: extra.spec ?? { containers: [{ name: 'web', image: 'nginx:1.27', ports: [{ containerPort: 8080 }] }] },
  };
}

/** The mutating handler over one fixed template set, for tests that call it directly. */
export function mutate(request: ReviewRequest, set: TemplateSet, scope?: OptInScope): Verdict {
  return mutating({ templates: () => set }, scope)(request);
}

/** The validating handler over one fixed template set, for tests that call it directly. */
export function validate(request: ReviewRequest, set: TemplateSet, scope?: OptInScope): Verdict {
  return validating({ templates: () => set }, scope)(request);
}
