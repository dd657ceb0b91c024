import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { findKubeadmit, mapLimit } from '../helpers/kubeadmit.js';
import type { Obj } from '../manifests/render.js';
import { assertInjected, assertUntouched, INJECT, paths, REV, status, scenario } from './cases.js';
import { startInstall, writeConfigurations, type RunningInstall } from './install.js';

const found = findKubeadmit();
const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

/** Where each pod goes when the default install and "canary" run side by side. */
const sideBySide: { namespace: Record<string, string>; pod: Record<string, string>; install: 'default' | 'canary' | undefined }[] = [
  { namespace: { [INJECT]: 'true' }, pod: {}, install: 'default' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: {}, install: 'canary' },
  { namespace: { [INJECT]: 'true' }, pod: { [REV]: 'canary' }, install: 'canary' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [REV]: 'canary' }, install: 'canary' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [INJECT]: 'false' }, install: undefined },
  { namespace: {}, pod: { [INJECT]: 'true' }, install: 'default' },
  { namespace: { [REV]: 'canary' }, pod: { [INJECT]: 'true' }, install: 'canary' },
  { namespace: {}, pod: { [INJECT]: 'true', [REV]: 'canary' }, install: 'canary' },
  // The pod's revision wins over its namespace's, even one nobody installed.
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [REV]: 'gone' }, install: undefined },
  { namespace: { [REV]: 'gone' }, pod: { [INJECT]: 'true', [REV]: 'canary' }, install: 'canary' },
  // A revision alone opts nothing in.
  { namespace: { [REV]: 'canary' }, pod: {}, install: undefined },
  // A revision nobody installed: no webhook takes the pod, which is stored as it was sent.
  { namespace: { [INJECT]: 'true' }, pod: { [REV]: 'gone' }, install: undefined },
  { namespace: { [INJECT]: 'true', [REV]: 'gone' }, pod: {}, install: undefined },
];

/**
 * The revision "canary" of `tool`, alone and beside the default install, each with its own injector
 * started as the image starts it, pods run through the apiserver's admission code (kubeadmit).
 * kubeadmit sends every Service to one address, so beside the default install the canary's webhooks
 * point at its injector by URL (with its CA as caBundle); their selectors are the rendered ones. The
 * status annotation names the install that injected.
 */
export function revisionSuite(tool: string, render: () => { byDefault: Obj[]; canary: Obj[] }): void {
  describe(`revision "canary" (${tool}), through the apiserver admission code (kubeadmit)`, { skip }, () => {
    let byDefault: RunningInstall;
    let canary: RunningInstall;
    let canaryConfigs: string;
    before(async () => {
      const objects = render();
      [byDefault, canary] = await Promise.all([startInstall(binary, objects.byDefault), startInstall(binary, objects.canary)]);
      const caBundle = Buffer.from(canary.caPem).toString('base64');
      const pointed = structuredClone(canary.configurations);
      for (const config of pointed) {
        for (const hook of config.webhooks) {
          const { path } = hook.clientConfig.service;
          hook.clientConfig = { url: `https://127.0.0.1:${canary.port}${path}`, caBundle };
        }
      }
      canaryConfigs = await writeConfigurations(pointed);
    });
    after(async () => {
      await byDefault?.close();
      await canary?.close();
    });

    it("alone, takes only pods of its revision, the pod's label winning over the namespace's", async () => {
      const rev = 'canary';
      const cases = [
        [scenario('shop', {}, { [INJECT]: 'true', [REV]: rev }), 'pod'],
        [scenario('shop', { [INJECT]: 'true', [REV]: rev }, {}), 'namespace'],
        [scenario('shop', { [INJECT]: 'true' }, { [REV]: rev }), 'namespace'],
        [scenario('shop', { [INJECT]: 'true', [REV]: rev }, { [INJECT]: 'false' }), 'none'],
        [scenario('shop', { [INJECT]: 'true', [REV]: rev }, { [REV]: 'other' }), 'none'],
        [scenario('shop', { [INJECT]: 'true' }, {}), 'none'],
        [scenario('shop', {}, { [INJECT]: 'true' }), 'none'],
        [scenario('kube-system', { [INJECT]: 'true', [REV]: rev }, {}), 'none'],
        [scenario('sidecar-injector', {}, { [INJECT]: 'true', [REV]: rev }), 'none'],
      ] as const;
      const results = await mapLimit(cases, 6, ([s]) => canary.admit(s));
      for (const [i, [, want]] of cases.entries()) {
        if (want === 'none') assertUntouched(results[i]!);
        else assertInjected(results[i]!, { scope: want, revision: rev });
      }
    });

    it("beside the default install, sends each pod to one install at most, the pod's revision winning over its namespace's", async () => {
      const results = await mapLimit(sideBySide, 6, (c) =>
        byDefault.admit(scenario('apps', c.namespace, c.pod), { configs: [byDefault.configFile, canaryConfigs] }),
      );
      for (const [i, c] of sideBySide.entries()) {
        const res = results[i]!;
        const label = `namespace ${JSON.stringify(c.namespace)}, pod ${JSON.stringify(c.pod)}`;
        assert.equal(res.allowed, true, `${label}: ${res.reason}`);
        if (c.install === undefined) {
          assert.deepEqual(paths(res), [], label);
          assert.equal(status(res), undefined, label);
        } else {
          assert.equal(paths(res).length, 2, `${label}: ${paths(res).join(' ')}`);
          assert.equal(status(res)?.revision, c.install === 'canary' ? 'canary' : undefined, label);
        }
      }
    });
  });
}
