import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { findKubeadmit, mapLimit, type Admission } from '../helpers/kubeadmit.js';
import { helmObjects, kustomizeObjects, type Obj } from '../manifests/render.js';
import { assertInjected, assertUntouched, INJECT, paths, scenario, status } from './cases.js';
import { startInstall, type RunningInstall } from './install.js';

/**
 * Every install a user makes, rendered from the repository with the real kustomize and helm, its
 * injector started as the image starts it, and pod CREATEs run through the kube-apiserver's own
 * admission code (kubeadmit): which pods reach the injector (namespaceSelector and objectSelector as
 * the apiserver evaluates them), and what is stored.
 */
const found = findKubeadmit();
const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

/** A pod CREATE in `namespace`, its namespace labelled `nsLabels`, the pod `podLabels`. */
type Outcome = 'pod' | 'namespace' | 'skipped' | 'none';
/** Pods labelled anything but "true" in an opted-in namespace reach the namespace scope, whose server skips them. */
const namespaces = {
  labelled: ['shop', { [INJECT]: 'true' }],
  unlabelled: ['shop', {}],
  'labelled "false"': ['shop', { [INJECT]: 'false' }],
  'kube-system (labelled)': ['kube-system', { [INJECT]: 'true' }],
  "the injector's own (labelled)": ['sidecar-injector', { [INJECT]: 'true' }],
  'runlevel 0 (labelled)': ['addons', { [INJECT]: 'true', runlevel: '0' }],
} as const;
const pods = {
  'labelled "true"': { [INJECT]: 'true' },
  'labelled "false"': { [INJECT]: 'false' },
  unlabelled: {},
  'labelled "yes"': { [INJECT]: 'yes' },
} as const;
const matrix: Record<keyof typeof namespaces, Record<keyof typeof pods, Outcome>> = {
  labelled: { 'labelled "true"': 'namespace', 'labelled "false"': 'none', unlabelled: 'namespace', 'labelled "yes"': 'skipped' },
  unlabelled: { 'labelled "true"': 'pod', 'labelled "false"': 'none', unlabelled: 'none', 'labelled "yes"': 'none' },
  'labelled "false"': { 'labelled "true"': 'pod', 'labelled "false"': 'none', unlabelled: 'none', 'labelled "yes"': 'none' },
  'kube-system (labelled)': { 'labelled "true"': 'none', 'labelled "false"': 'none', unlabelled: 'none', 'labelled "yes"': 'none' },
  "the injector's own (labelled)": { 'labelled "true"': 'none', 'labelled "false"': 'none', unlabelled: 'none', 'labelled "yes"': 'none' },
  'runlevel 0 (labelled)': { 'labelled "true"': 'none', 'labelled "false"': 'none', unlabelled: 'none', 'labelled "yes"': 'none' },
};

function assertOutcome(res: Admission, outcome: Outcome, revision?: string): void {
  if (outcome === 'none') return assertUntouched(res);
  if (outcome === 'skipped') {
    assert.equal(res.allowed, true, res.reason);
    assert.deepEqual(paths(res), ['m:/mutate/namespace', 'v:/validate/namespace']);
    assert.equal(status(res), undefined);
    return;
  }
  assertInjected(res, { scope: outcome, ...(revision !== undefined && { revision }) });
}

/** The two installs a newcomer starts with; every other install gets the shorter list in components.test.ts. */
const installs: { name: string; objects: () => Obj[] }[] = [
  { name: 'kustomize manifests/base', objects: () => kustomizeObjects('base') },
  { name: 'helm template (default values)', objects: () => helmObjects() },
];

describe('namespace and pod opt-in, through the apiserver admission code (kubeadmit)', { skip }, () => {
  for (const install of installs) {
    describe(install.name, () => {
      let running: RunningInstall;
      before(async () => (running = await startInstall(binary, install.objects())));
      after(() => running?.close());

      it('takes each namespace x pod case as docs/operating.md says: opt-in by pod or namespace label, opt-out, system and own namespaces', async (t) => {
        const cases = Object.entries(namespaces).flatMap(([nsCase, [name, labels]]) =>
          Object.entries(pods).map(([podCase, podLabels]) => ({ nsCase, podCase, name, labels, podLabels })),
        );
        const results = await mapLimit(cases, 6, (c) => running.admit(scenario(c.name, c.labels, c.podLabels)));
        for (const [i, c] of cases.entries()) {
          const want = matrix[c.nsCase as keyof typeof namespaces][c.podCase as keyof typeof pods];
          await t.test(`namespace ${c.nsCase}, pod ${c.podCase}`, () => assertOutcome(results[i]!, want));
        }
      });
    });
  }
});
