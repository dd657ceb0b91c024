import assert from 'node:assert/strict';
import type { Admission, Scenario } from '../helpers/kubeadmit.js';

export const INJECT = 'sidecar-injector.io/inject';
export const REV = 'sidecar-injector.io/rev';
export const STATUS = 'sidecar-injector.io/status';

/** A Deployment's pod as its ReplicaSet creates it: generateName only, the app container alone. */
export function appPod(labels: Record<string, string> = {}, annotations?: Record<string, string>): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-7d9f8b6c5-', labels: { 'app.kubernetes.io/name': 'web', ...labels }, ...(annotations && { annotations }) },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] },
  };
}

/** A CREATE of appPod(podLabels) in `namespace`, a namespace labelled `nsLabels`. */
export function scenario(namespace: string, nsLabels: Record<string, string>, podLabels: Record<string, string>): Scenario {
  return { namespace, namespaces: { [namespace]: { labels: nsLabels } }, object: appPod(podLabels) };
}

/** The names of the stored pod's containers (init containers first, marked "init:"). */
export function containerNames(res: Admission): string[] {
  const spec = res.object?.spec ?? {};
  return [...(spec.initContainers ?? []).map((c: any) => `init:${c.name}`), ...(spec.containers ?? []).map((c: any) => c.name)];
}

/** The stored pod's status annotation, parsed. */
export function status(res: Admission): any {
  const text = res.object?.metadata?.annotations?.[STATUS];
  return text === undefined ? undefined : JSON.parse(text);
}

/** The webhook paths kubeadmit called, mutating ones marked "m:" and validating ones "v:", interlopers left out. */
export function paths(res: Admission): string[] {
  return res.calls.filter((c) => !c.interloper).map((c) => `${c.mutating ? 'm' : 'v'}:${c.path}`);
}

/** Admitted with the sidecars of `templates` (log-shipper by default), the mutating and validating webhook of one scope called once each. */
export function assertInjected(res: Admission, opts: { scope?: 'pod' | 'namespace'; templates?: string[]; revision?: string } = {}): void {
  assert.equal(res.allowed, true, res.reason);
  const suffix = opts.scope === 'namespace' ? '/namespace' : '';
  if (opts.scope !== undefined) assert.deepEqual(paths(res), [`m:/mutate${suffix}`, `v:/validate${suffix}`]);
  const s = status(res);
  assert.ok(s, `no ${STATUS} on the stored pod`);
  assert.deepEqual(s.templates, opts.templates ?? ['log-shipper']);
  assert.equal(s.revision, opts.revision);
  for (const t of s.injected) {
    for (const name of Object.keys(t.containers ?? {})) assert.ok(containerNames(res).includes(name), `container ${name} stored`);
    for (const name of Object.keys(t.initContainers ?? {})) assert.ok(containerNames(res).includes(`init:${name}`), `native sidecar ${name} stored`);
  }
}

/** Admitted untouched: no webhook of the injector called, the stored pod the one sent (defaulted). */
export function assertUntouched(res: Admission): void {
  assert.equal(res.allowed, true, res.reason);
  assert.deepEqual(paths(res), []);
  assert.equal(status(res), undefined);
  assert.deepEqual(containerNames(res), ['app']);
}
