import assert from 'node:assert/strict';

/** The injector's namespace in the tests that serve SidecarTemplate objects: its objects are the cluster-wide templates. */
export const HOME = 'sidecar-injector';

/** A SidecarTemplate object of one container named as the template, as a team would apply it. */
export function sct(namespace: string, name: string, image: string, extra: object = {}): any {
  return {
    apiVersion: 'sidecar-injector.io/v1alpha1',
    kind: 'SidecarTemplate',
    metadata: { name, namespace },
    spec: { containers: [{ name, image }], ...extra },
  };
}

/** Polls `check` until it holds (a watch event reaches the set within a few seconds), else fails naming `what`. */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for: ${what}`);
}
