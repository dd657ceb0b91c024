import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admit, INJECT, scenarioOf, skip, startModes, type Modes, type Obj } from '../helpers/policy-parity.js';

const TEMPLATES = 'sidecar-injector.io/templates';
const REQUIRED = { 'sidecar-injector.io/required': 'true' };

/** The scenario's pod with `n` containers of its app's kind, and `env` env vars in the first. */
function wide(scenario: Obj, n: number, env = 0): Obj {
  const containers = Array.from({ length: n }, (_, i) => ({ name: i === 0 ? 'app' : `app-${i}`, image: 'nginx:1.27' }));
  if (env > 0) Object.assign(containers[0]!, { env: Array.from({ length: env }, (_, j) => ({ name: `SETTING_${j}`, value: 'on' })) });
  return { ...scenario, object: { ...scenario['object'], spec: { containers } } };
}

const BOUNDS = /^pods "web-7d9f8b6c5-\w+" is forbidden: ValidatingAdmissionPolicy 'sidecar-injector-validate-bounds' with binding '[^']+' denied request: /;

/**
 * A pod over the bounds of what the policies' CEL iterates (src/policy/bounds.ts) is left alone by
 * every policy and refused by the bounds policy with one line; the webhook refuses it too, with
 * the same words where it has the limit (POD_OVER_LIMIT).
 */
describe('policy mode refuses a pod over the bounds as webhook mode does (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('templates');
  });
  after(async () => modes?.close());
  const optedIn = (annotations: Obj = {}): Obj => scenarioOf('shop', { [INJECT]: 'true' }, annotations);

  it("refuses a pod of --max-containers + 1 containers, and one with --max-env-per-container + 1 env vars, with the webhook's message", async () => {
    const cases: [string, Obj, string][] = [
      [
        '251 containers',
        wide(optedIn(), 251),
        'the pod has 251 containers (containers, initContainers and ephemeralContainers together), over the limit of 250 (--max-containers); no real workload needs that many, ask the operator to raise the flag if yours does',
      ],
      [
        '1001 env vars',
        wide(optedIn(), 2, 1001),
        'the pod has 1001 env vars in spec.containers[0], over the limit of 1000 (--max-env-per-container); no real workload needs that many, ask the operator to raise the flag if yours does',
      ],
    ];
    for (const [what, scenario, message] of cases) {
      const [webhook, policy] = await Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);
      assert.equal(webhook.allowed, false, what);
      assert.ok(webhook.reason?.includes(message), `${what}: ${webhook.reason}`);
      assert.equal(policy.allowed, false, what);
      assert.match(policy.reason ?? '', BOUNDS, what);
      assert.ok(policy.reason?.endsWith(message), `${what}: ${policy.reason}`);
    }
  });

  it('refuses a pod naming 5,000 templates, saying the annotation is over its limit; the webhook refuses it as naming unknown templates', async () => {
    const scenario = optedIn({ [TEMPLATES]: `log-shipper${',x'.repeat(5000)}` });
    const [webhook, policy] = await Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);
    assert.equal(webhook.allowed, false);
    assert.match(webhook.reason ?? '', /unknown sidecar template\(s\) "x"/);
    assert.equal(policy.allowed, false);
    assert.match(policy.reason ?? '', BOUNDS);
    assert.match(
      policy.reason ?? '',
      /denied request: annotation sidecar-injector\.io\/templates has 10011 characters, over the policies' limit of 4096; name each template or container once$/,
    );
  });

  it('leaves a pod at the bounds to the policies, which inject it as the webhook does', async () => {
    const scenario = wide(optedIn({ [TEMPLATES]: 'log-shipper' }), 249);
    const [webhook, policy] = await Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);
    assert.equal(webhook.allowed, true, webhook.reason);
    assert.equal(policy.allowed, true, policy.reason);
    const names = (o: Obj | undefined): string[] => (o?.['spec']?.['containers'] ?? []).map((c: Obj) => c['name']);
    assert.equal(names(policy.object).length, 250, '249 and the sidecar: at the limit the policies still inject');
    assert.deepEqual(names(policy.object), names(webhook.object));
  });
});

/** Where a template is required, a pod that did not opt in is held too: over a bound, it is refused rather than let through without the template. */
describe('policy mode refuses a pod over the bounds where a template is required (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('test/fixtures/policy/required', { required: true });
  });
  after(async () => modes?.close());

  it("refuses a pod of a required namespace that did not opt in, with the webhook's message", async () => {
    const scenario = wide(scenarioOf('team-b', {}, {}, REQUIRED), 251);
    const [webhook, policy] = await Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);
    const message = 'the pod has 251 containers (containers, initContainers and ephemeralContainers together), over the limit of 250 (--max-containers)';
    assert.equal(webhook.allowed, false);
    assert.ok(webhook.reason?.includes(message), webhook.reason);
    assert.equal(policy.allowed, false);
    assert.match(policy.reason ?? '', BOUNDS);
    assert.ok(policy.reason?.includes(message), policy.reason);
  });

  it('leaves a pod of a namespace where nothing is required, not opted in, alone', async () => {
    const scenario = wide(scenarioOf('legacy', {}, {}, {}), 251);
    const policy = await admit(modes, modes.policies, scenario);
    assert.equal(policy.allowed, true, policy.reason);
  });
});
