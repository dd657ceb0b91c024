import assert from 'node:assert/strict';
import { httpsRequest } from './client.js';
import { applyPatchV4 } from './jsonpatch-v4.js';
import { decodePatch, podReview } from './review.js';
import { podProblems } from './pod.js';

export interface Admitted {
  readonly response: any;
  /** The pod after the patch, as the apiserver would store it (before defaulting). */
  readonly pod: any;
  readonly ops: any[];
}

/**
 * Plays the kube-apiserver's side of a mutating call (k8s.io/apiserver admissionreview.go and
 * mutating/dispatcher.go): checks the envelope it would reject, applies the patch with a strict,
 * independent applier of evanphx/json-patch v4 semantics (an `add` under a missing parent fails),
 * and runs the pod validation a wrong patch would trip.
 */
export async function admit(url: string, ca: string, pod: object, opts: Parameters<typeof podReview>[1] = {}): Promise<Admitted> {
  const review = podReview(pod, opts);
  const res = await httpsRequest(`${url}/mutate`, JSON.stringify(review), { ca });
  assert.equal(res.status, 200, res.text);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const body = res.json();
  assert.equal(body.apiVersion, review.apiVersion, 'answered in the version it was asked in');
  assert.equal(body.kind, 'AdmissionReview');
  const response = body.response;
  assert.equal(response.uid, review.request.uid, 'response.uid must echo request.uid');
  assert.equal(response.patch === undefined, response.patchType === undefined, 'patch and patchType go together');
  if (response.patchType !== undefined) assert.equal(response.patchType, 'JSONPatch');
  const ops = decodePatch(response);
  const patched = applyPatchV4(pod, ops);
  if (response.allowed) assert.deepEqual(podProblems(patched), [], 'the patched pod must be valid');
  return { response, pod: patched, ops };
}

/** Sends a pod to /validate and returns the AdmissionResponse, after the same envelope checks. */
export async function validatePod(url: string, ca: string, pod: object, opts: Parameters<typeof podReview>[1] = {}): Promise<any> {
  const review = podReview(pod, opts);
  const res = await httpsRequest(`${url}/validate`, JSON.stringify(review), { ca });
  assert.equal(res.status, 200, res.text);
  const body = res.json();
  assert.equal(body.apiVersion, review.apiVersion);
  assert.equal(body.response.uid, review.request.uid);
  assert.equal(body.response.patch, undefined, 'a validating webhook may not return a patch');
  return body.response;
}
