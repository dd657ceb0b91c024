import { after, before, describe, it } from 'node:test';
import { findKubeadmit, mapLimit } from '../helpers/kubeadmit.js';
import { kustomizations, kustomizeWithComponent, type Obj } from '../manifests/render.js';
import { assertInjected, assertUntouched, INJECT, scenario } from './cases.js';
import { startInstall, type RunningInstall } from './install.js';

/**
 * Each component of manifests/components on the kustomize base (components/revision: in
 * revisions-kustomize.test.ts; components/policy: in policy-mode.test.ts), rendered with the real kustomize, the injector started as the image starts it, pods run through the
 * kube-apiserver's admission code (kubeadmit). The full opt-in matrix runs on the base and the
 * chart's defaults (opt-in.test.ts); here each install answers the cases that tell it works.
 */
const found = findKubeadmit();
const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

// components/policy and components/hybrid: in policy-mode.test.ts (the policies inject there, not this webhook).
const components = kustomizations().components.filter((c) => !['components/revision', 'components/policy', 'components/hybrid'].includes(c));
const installs: { name: string; objects: () => Obj[] }[] = [
  ...components.map((c) => ({ name: `kustomize manifests/base + ${c}`, objects: () => kustomizeWithComponent('base', c) })),
];

describe('each component on the kustomize base, through the apiserver admission code (kubeadmit)', { skip }, () => {
  // The injectors start side by side: most of a start is waiting on the loader.
  const started = new Map<string, RunningInstall>();
  before(async () => {
    const rendered = installs.map((i) => [i.name, i.objects()] as const);
    for (const [name, r] of await Promise.all(rendered.map(async ([name, objects]) => [name, await startInstall(binary, objects)] as const)))
      started.set(name, r);
  });
  after(() => Promise.all([...started.values()].map((r) => r.close())));
  for (const install of installs) {
    describe(install.name, () => {
      let running: RunningInstall;
      before(() => void (running = started.get(install.name)!));

      it('injects pods opted in by their label or their namespace, and leaves opted-out pods and system namespaces alone', async () => {
        const [byPod, byNamespace, optedOut, system] = await mapLimit(
          [
            scenario('shop', {}, { [INJECT]: 'true' }),
            scenario('shop', { [INJECT]: 'true' }, {}),
            scenario('shop', { [INJECT]: 'true' }, { [INJECT]: 'false' }),
            scenario('kube-system', { [INJECT]: 'true' }, { [INJECT]: 'true' }),
          ],
          4,
          (s) => running.admit(s),
        );
        assertInjected(byPod!, { scope: 'pod' });
        assertInjected(byNamespace!, { scope: 'namespace' });
        assertUntouched(optedOut!);
        assertUntouched(system!);
      });
    });
  }
});
