import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { webhookCalls } from '../../src/kube/selectors.js';
import type { WebhookConfiguration } from '../../src/kube/types.js';
import { helmObjects, kustomizeObjects, kustomizeWithComponent, type Obj } from './render.js';

/**
 * Which install a pod reaches, as the apiserver decides it from the rendered webhook configurations'
 * selectors (src/kube/selectors.ts): the pod's sidecar-injector.io/rev wins over its namespace's,
 * as istio.io/rev does, and the default install takes only pods where neither names a revision.
 */
const REV = 'sidecar-injector.io/rev';
const INJECT = 'sidecar-injector.io/inject';

const configurations = (objects: Obj[]): WebhookConfiguration[] => objects.filter((o) => o.kind.endsWith('WebhookConfiguration')) as WebhookConfiguration[];

/** Three installs side by side: the default, "canary" and "b", from the chart and from kustomize. */
const renderings = {
  helm: { default: configurations(helmObjects()), canary: configurations(helmObjects({ set: { revision: 'canary' } })), b: configurations(helmObjects({ set: { revision: 'b' } })) },
  kustomize: { default: configurations(kustomizeObjects('')), canary: configurations(kustomizeWithComponent('base', 'components/revision')) },
};

interface Case {
  readonly namespace: Record<string, string>;
  readonly pod: Record<string, string>;
  /** The install whose webhooks take the pod, or none. */
  readonly install: 'default' | 'canary' | 'b' | undefined;
}

const cases: readonly Case[] = [
  { namespace: { [INJECT]: 'true' }, pod: {}, install: 'default' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: {}, install: 'canary' },
  { namespace: { [INJECT]: 'true' }, pod: { [REV]: 'canary' }, install: 'canary' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [REV]: 'b' }, install: 'b' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [REV]: 'canary' }, install: 'canary' },
  { namespace: { [INJECT]: 'true', [REV]: 'canary' }, pod: { [INJECT]: 'false' }, install: undefined },
  // Pod scope: the pod opts in, in a namespace that did not.
  { namespace: {}, pod: { [INJECT]: 'true' }, install: 'default' },
  { namespace: { [REV]: 'canary' }, pod: { [INJECT]: 'true' }, install: 'canary' },
  { namespace: {}, pod: { [INJECT]: 'true', [REV]: 'canary' }, install: 'canary' },
  { namespace: { [REV]: 'b' }, pod: { [INJECT]: 'true', [REV]: 'canary' }, install: 'canary' },
  // A revision alone opts nothing in.
  { namespace: { [REV]: 'canary' }, pod: {}, install: undefined },
  // A revision no install serves: no webhook takes the pod (it is created as it is).
  { namespace: { [INJECT]: 'true' }, pod: { [REV]: 'gone' }, install: undefined },
];

describe('revisions', () => {
  for (const [tool, installs] of Object.entries(renderings)) {
    it(`sends each pod to the webhooks of one install at most, the pod's revision winning over its namespace's (${tool})`, () => {
      for (const c of cases) {
        const want = c.install !== undefined && c.install in installs ? c.install : undefined;
        const pod = { namespace: 'apps', namespaceLabels: { 'kubernetes.io/metadata.name': 'apps', ...c.namespace }, podLabels: c.pod };
        const reached = Object.entries(installs).map(([name, configs]) => [name, webhookCalls(pod, configs)] as const).filter(([, calls]) => calls.length > 0);
        const label = `namespace ${JSON.stringify(c.namespace)}, pod ${JSON.stringify(c.pod)}`;
        assert.deepEqual(reached.map(([name]) => name), want === undefined ? [] : [want], label);
        if (want === undefined) continue;
        // One mutating webhook and its validating twin, on the same scope: the pod is checked
        // against the templates of the install that injected it.
        const calls = reached[0]![1];
        assert.deepEqual(calls.map((call) => call.configuration), ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'], label);
        assert.equal(calls[1]!.path, calls[0]!.path.replace('/mutate', '/validate'), label);
      }
    });
  }
});
