import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compilePolicies } from '../../src/policy/compile.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { admit, INJECT, scenarioOf, sidecarsOf, skip, startModes, type Modes } from '../helpers/policy-parity.js';

const TEMPLATES = 'sidecar-injector.io/templates';
const DIR = 'test/fixtures/policy/hybrid';

/**
 * Hybrid (PolicyOptions.hybrid): proxy compiles, tuned (per-pod overrides) does not and is the
 * webhook's. The hybrid validating policy leaves tuned to /validate; the policy-mode one refuses a
 * pod that selects it, since no policy would inject it.
 */
describe('hybrid: the validating policy checks the compiled templates only (kubeadmit)', { skip }, () => {
  let modes: Modes;
  let alone: string;
  before(async () => {
    modes = await startModes(DIR, { hybrid: true });
    const { objects } = compilePolicies(await loadTemplateSet(DIR), { namespace: 'sidecar-injector' });
    alone = await modes.write(
      'policy-mode-validating.json',
      objects.filter((o) => String(o['kind']).startsWith('Validating')),
    );
  });
  after(async () => modes?.close());

  it('does not refuse a pod selecting a webhook-only template; the policy-mode validating policy does', async () => {
    const scenario = scenarioOf('shop', { [INJECT]: 'true' }, { [TEMPLATES]: 'tuned' });
    const hybrid = await admit(modes, modes.validatingPolicy, scenario);
    assert.equal(hybrid.allowed, true, hybrid.reason);
    const policyMode = await admit(modes, alone, scenario);
    assert.equal(policyMode.allowed, false);
    assert.match(policyMode.reason ?? '', /denied request: template\(s\) tuned are injected by the webhook only/);
  });

  it('still refuses a pod without a compiled template it selects, beside a webhook-only one', async () => {
    const res = await admit(modes, modes.validatingPolicy, scenarioOf('shop', { [INJECT]: 'true' }, { [TEMPLATES]: 'tuned,proxy' }));
    assert.equal(res.allowed, false);
    assert.match(res.reason ?? '', /pod opted in to sidecar injection but is missing: container "proxy" of template "proxy"$/);
  });

  it('injects the compiled template and leaves the webhook-only one to the webhook', async () => {
    const res = await admit(modes, modes.policies, scenarioOf('shop', { [INJECT]: 'true' }, { [TEMPLATES]: 'proxy,tuned' }));
    assert.equal(res.allowed, true, res.reason);
    assert.deepEqual(sidecarsOf(res), ['proxy=registry.example.com/proxy:1']);
  });
});
