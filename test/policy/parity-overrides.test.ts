import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admit, assertSame, INJECT, scenarioOf, skip, startModes, type Modes, type Obj } from '../helpers/policy-parity.js';

const TEMPLATES = 'sidecar-injector.io/templates';

/** Per-pod cpu and memory overrides (test/fixtures/policy/overrides): valid ones applied as /mutate applies them, invalid ones refused in both modes. */
describe('policy mode stores the pods webhook mode stores, with cpu and memory overrides (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('test/fixtures/policy/overrides');
  });
  after(async () => modes?.close());
  const pod = (annotations: Obj, templates = 'agent,tiny'): Obj => scenarioOf('shop', { [INJECT]: 'true' }, { [TEMPLATES]: templates, ...annotations });
  const resources = (res: { object?: Obj }, name: string): Obj =>
    [...(res.object?.['spec']?.['initContainers'] ?? []), ...(res.object?.['spec']?.['containers'] ?? [])].find((c: Obj) => c['name'] === name)?.['resources'];

  it('sets the request and raises a lower limit; leaves the template as it is without an override', async () => {
    const cases: [Obj, Obj][] = [
      // The apiserver defaults a missing request to its limit (memory here).
      [{}, { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '100m', memory: '128Mi' } }],
      [{ 'agent.sidecar-injector.io/cpu': '75m' }, { requests: { cpu: '75m', memory: '128Mi' }, limits: { cpu: '100m', memory: '128Mi' } }],
      [{ 'agent.sidecar-injector.io/cpu': ' 250m ' }, { requests: { cpu: '250m', memory: '128Mi' }, limits: { cpu: '250m', memory: '128Mi' } }],
      [{ 'agent.sidecar-injector.io/memory': '64Mi' }, { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '100m', memory: '128Mi' } }],
      [
        { 'agent.sidecar-injector.io/memory': '1Gi', 'agent.sidecar-injector.io/cpu': '0.1' },
        { requests: { cpu: '100m', memory: '1Gi' }, limits: { cpu: '100m', memory: '1Gi' } },
      ],
      [{ 'agent.sidecar-injector.io/image': 'evil:1' }, { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '100m', memory: '128Mi' } }],
    ];
    for (const [annotations, expected] of cases) {
      const [webhook] = await assertSame(modes, JSON.stringify(annotations), pod(annotations), true);
      assert.deepEqual(resources(webhook, 'agent'), expected, JSON.stringify(annotations));
    }
    const [tiny] = await assertSame(modes, 'tiny', pod({ 'tiny.sidecar-injector.io/cpu': '2' }, 'tiny'), true);
    assert.deepEqual(resources(tiny, 'tiny'), { requests: { cpu: '2' } });
  });

  it('refuses an invalid value in both modes, saying why', async () => {
    const cases: [string, RegExp][] = [
      ['abc', /annotation agent.sidecar-injector.io\/cpu: "abc" is not a Kubernetes quantity \(for example 250m or 1\)/],
      ['-1', /is not a Kubernetes quantity/],
      ['0', /annotation agent.sidecar-injector.io\/cpu: cpu must be greater than zero/],
      ['', /is not a Kubernetes quantity/],
    ];
    for (const [value, message] of cases) {
      const scenario = pod({ 'agent.sidecar-injector.io/cpu': value });
      const [webhook, policy] = await assertSame(modes, JSON.stringify(value), scenario, true);
      assert.equal(webhook.allowed, false, value);
      assert.match(webhook.reason ?? '', message, value);
      assert.match(policy.reason ?? '', message, value);
    }
    const alone = await admit(modes, modes.policies, pod({ 'agent.sidecar-injector.io/memory': 'lots' }));
    assert.match(
      alone.reason ?? '',
      /ValidatingAdmissionPolicy 'sidecar-injector-validate' with binding 'sidecar-injector-validate-pod' denied request: annotation agent.sidecar-injector.io\/memory: "lots" is not a Kubernetes quantity/,
    );
  });
});
