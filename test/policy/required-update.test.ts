import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { verifyUpdate } from '../../src/inject/verify.js';
import type { Pod } from '../../src/kube/types.js';
import { compilePolicies } from '../../src/policy/compile.js';
import { findCelcost, measureCost } from '../../src/policy/cost.js';
import { loadTemplateSet, type TemplateSet } from '../../src/templates/load.js';

const found = findCelcost();
const skip = 'absent' in found ? found.absent : false;
const binary = 'binary' in found ? found.binary : '';

const AGENT = 'registry.example.com/agent:1';
const POLICY = 'sidecar-injector-validate-required';
const JOB = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'backup', uid: '6f1c9a50-0c43-4a52-9e2f-3a1d0a4a7d11', controller: true }];

/** A pod as stored after the required template was added (test/fixtures/policy/required: agent, native in Jobs' pods). */
function injected(namespace: string, job = false): Pod {
  const agent = { name: 'agent', image: AGENT, env: [{ name: 'AGENT_NAMESPACE', value: namespace }] };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-7d9f8b6c5-x2x7k', namespace, labels: { app: 'web' }, ...(job && { ownerReferences: JOB }) },
    spec: {
      ...(job && { initContainers: [{ ...agent, restartPolicy: 'Always' }] }),
      containers: [{ name: 'app', image: 'nginx:1.27' }, ...(job ? [] : [agent])],
      volumes: [{ name: 'agent-socket', emptyDir: {} }],
    },
  } as Pod;
}

function edited(pod: Pod, change: (p: any) => void): Pod {
  const copy = structuredClone(pod);
  change(copy);
  return copy;
}

const sidecar = (p: any): any => [...(p.spec.initContainers ?? []), ...p.spec.containers].find((c: any) => c.name === 'agent');

/**
 * A pod UPDATE against sidecar-injector-validate-required, with the apiserver's CEL (celcost
 * --old-pod: the policy plugins' compiler and ForInput, oldObject and operation UPDATE), and the
 * same UPDATE against the webhook's verifyUpdate (what /validate/required answers): the same
 * verdict, and a denial with the same message. kubeadmit runs CREATE only, so the policy's
 * matchConstraints and binding are not exercised on UPDATE here; the policy is checked to declare them.
 */
describe('policy mode holds a required sidecar on UPDATE as /validate/required does (celcost)', { skip }, () => {
  let set: TemplateSet;
  let policy: Record<string, any>;
  before(async () => {
    set = await loadTemplateSet('test/fixtures/policy/required');
    const { objects } = compilePolicies(set, { namespace: 'sidecar-injector' });
    policy = objects.find((o: any) => o.metadata.name === POLICY) as Record<string, any>;
  });

  /** [the policy's verdict (undefined: allowed) or "not evaluated" by its matchConditions, the webhook's]. */
  async function both(old: Pod, pod: Pod): Promise<{ policy: string | undefined; matched: boolean; webhook: string | undefined }> {
    const namespace = old.metadata!.namespace!;
    const report = await measureCost(binary, [policy], [pod], { namespace, oldPod: old });
    const [result] = report.policies[0]!.pods;
    assert.equal(result?.error, undefined, `celcost: ${result?.error}`);
    const verdict = verifyUpdate(pod, old, set, namespace);
    return { policy: result?.denials?.[0], matched: result?.matched === true, webhook: verdict.kind === 'denied' ? verdict.error.message : undefined };
  }

  it('sees pod UPDATEs, only those that change an image', () => {
    assert.deepEqual(policy['spec']['matchConstraints']['resourceRules'][0]['operations'], ['CREATE', 'UPDATE']);
    assert.deepEqual(
      policy['spec']['matchConditions'].map((c: any) => c.name),
      ['create-or-image-change'],
    );
  });

  it("refuses what the webhook refuses: another image for the required sidecar, another tag or a digest, dropping it, a Job's native sidecar swapped", async () => {
    const team = injected('team-b');
    const cases: [string, Pod, Pod, string][] = [
      [
        'kubectl set image agent=evil',
        team,
        edited(team, (p) => (sidecar(p).image = 'evil.example.com/agent:1')),
        'sets the image of its container "agent" to evil.example.com/agent:1',
      ],
      ['another tag', team, edited(team, (p) => (sidecar(p).image = 'registry.example.com/agent:0-old')), 'registry.example.com/agent:0-old'],
      ['a digest added', team, edited(team, (p) => (sidecar(p).image = `${AGENT}@sha256:${'ab'.repeat(32)}`)), `${AGENT}@sha256:`],
      ['busybox', team, edited(team, (p) => (sidecar(p).image = 'busybox')), 'to busybox (the template injects registry.example.com/agent:1)'],
      [
        'the sidecar dropped',
        team,
        edited(team, (p) => (p.spec.containers = p.spec.containers.filter((c: any) => c.name !== 'agent'))),
        'removes its container "agent"',
      ],
      [
        "a Job's native sidecar",
        injected('team-b', true),
        edited(injected('team-b', true), (p) => (sidecar(p).image = 'busybox')),
        'its native sidecar "agent" to busybox',
      ],
    ];
    for (const [what, old, pod, says] of cases) {
      const verdict = await both(old, pod);
      assert.ok(verdict.webhook?.includes(says), `${what}: the webhook says ${verdict.webhook}`);
      assert.equal(verdict.policy, verdict.webhook, what);
    }
  });

  it('refuses the swap when the same UPDATE pushes the annotations or ownerReferences over the bounds', async () => {
    const team = injected('team-b');
    const names = Array.from({ length: 2000 }, (_, i) => `t${i}`).join(',');
    const swapped = edited(team, (p) => {
      sidecar(p).image = 'evil.example.com/agent:1';
      p.metadata.annotations = { 'sidecar-injector.io/templates': names };
    });
    const verdict = await both(team, swapped);
    assert.equal(verdict.matched, true, 'evaluated: no bound is the guard of an UPDATE');
    assert.ok(verdict.webhook?.includes('sets the image of its container "agent" to evil.example.com/agent:1'), verdict.webhook);
    assert.equal(verdict.policy, verdict.webhook);
  });

  it('refuses the swap on a pod whose ephemeral container (kubectl debug) is over the bounds', async () => {
    const debugged = edited(injected('team-b'), (p) => {
      p.spec.ephemeralContainers = [{ name: 'debugger', image: 'busybox', env: Array.from({ length: 1001 }, (_, i) => ({ name: `V${i}`, value: 'x' })) }];
    });
    const swapped = edited(debugged, (p) => (sidecar(p).image = 'evil.example.com/agent:1'));
    const verdict = await both(debugged, swapped);
    assert.equal(verdict.matched, true, 'evaluated');
    assert.ok(verdict.policy?.includes('sets the image of its container "agent" to evil.example.com/agent:1'), verdict.policy);
  });

  it('allows what the webhook allows: labels, the application, no change, a swapped sidecar set back, other namespaces, pods never injected', async () => {
    const team = injected('team-b');
    const tampered = edited(team, (p) => (sidecar(p).image = 'evil.example.com/agent:1'));
    const bare = edited(team, (p) => (p.spec.containers = p.spec.containers.filter((c: any) => c.name !== 'agent')));
    const cases: [string, Pod, Pod, boolean][] = [
      ['a label', team, edited(team, (p) => (p.metadata.labels.tier = 'gold')), false],
      ["the application's image", team, edited(team, (p) => (p.spec.containers[0].image = 'nginx:1.28')), true],
      ['nothing changed', team, structuredClone(team), false],
      ["set back to the template's image", tampered, team, true],
      ['namespace legacy, where it is not required', injected('legacy'), edited(injected('legacy'), (p) => (sidecar(p).image = 'busybox')), true],
      ['a pod that never got the sidecar', bare, edited(bare, (p) => (p.spec.containers[0].image = 'nginx:1.28')), true],
    ];
    for (const [what, old, pod, evaluated] of cases) {
      const verdict = await both(old, pod);
      assert.equal(verdict.webhook, undefined, `${what}: the webhook allows it`);
      assert.equal(verdict.policy, undefined, `${what}: the policy allows it`);
      assert.equal(verdict.matched, evaluated, `${what}: ${evaluated ? 'evaluated' : 'left out by the matchCondition'}`);
    }
  });
});
