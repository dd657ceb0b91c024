import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admit, assertSame, INJECT, scenarioOf, sidecarsOf, skip, startModes, type Modes, type Obj } from '../helpers/policy-parity.js';

const TEMPLATES = 'sidecar-injector.io/templates';
const REQUIRED = { 'sidecar-injector.io/required': 'true' };

/**
 * Required templates (test/fixtures/policy/required: agent, required everywhere but namespace
 * legacy; mesh, the default; logger) against the webhook with the required webhooks installed
 * (manifests/components/required), in namespaces labelled for them.
 */
describe('policy mode stores the pods webhook mode stores, with a required template (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('test/fixtures/policy/required', { required: true });
  });
  after(async () => modes?.close());

  it('adds the required template to every opted-in pod, in the order /mutate gives it', async () => {
    const cases: [string, Obj, string[]][] = [
      ['the defaults', scenarioOf('team-b', { [INJECT]: 'true' }, {}, REQUIRED), ['mesh-init', 'mesh', 'agent']],
      ['logger', scenarioOf('team-b', { [INJECT]: 'true' }, { [TEMPLATES]: 'logger' }, REQUIRED), ['logger', 'agent']],
      ['agent,logger', scenarioOf('team-b', { [INJECT]: 'true' }, { [TEMPLATES]: 'agent,logger' }, REQUIRED), ['logger', 'agent']],
      [
        'mesh,agent,logger',
        scenarioOf('team-b', { [INJECT]: 'true' }, { [TEMPLATES]: 'mesh,agent,logger' }, REQUIRED),
        ['mesh-init', 'logger', 'mesh', 'agent'],
      ],
      ['a namespace opted in', scenarioOf('team-b', {}, {}, { ...REQUIRED, [INJECT]: 'true' }), ['mesh-init', 'mesh', 'agent']],
      ['a namespace the selector leaves out', scenarioOf('legacy', { [INJECT]: 'true' }, {}, REQUIRED), ['mesh-init', 'mesh']],
    ];
    for (const [what, scenario, sidecars] of cases) {
      const [webhook] = await assertSame(modes, what, scenario, true);
      assert.deepEqual(
        sidecarsOf(webhook).map((s) => s.split('=')[0]),
        sidecars,
        what,
      );
    }
  });

  it('adds it alone to every other pod of its namespaces, whatever the pod says; leaves the pods of the others alone', async () => {
    const cases: [string, Obj, boolean][] = [
      ['a pod labelled inject "false"', scenarioOf('team-b', { [INJECT]: 'false' }, {}, REQUIRED), true],
      ['a pod labelled with a revision nobody installed', scenarioOf('team-b', { [INJECT]: 'true', 'sidecar-injector.io/rev': 'nobody' }, {}, REQUIRED), true],
      ['a pod of a namespace that did not opt in', scenarioOf('team-b', {}, {}, REQUIRED), true],
      ['a pod that opted out and names logger', scenarioOf('team-b', { [INJECT]: 'no' }, { [TEMPLATES]: 'logger' }, { ...REQUIRED, [INJECT]: 'true' }), true],
      ['an opted-out pod of namespace legacy', scenarioOf('legacy', { [INJECT]: 'false' }, {}, REQUIRED), false],
    ];
    for (const [what, scenario, injected] of cases) {
      const [webhook] = await assertSame(modes, what, scenario, injected);
      assert.deepEqual(
        sidecarsOf(webhook).map((s) => s.split('=')[0]),
        injected ? ['agent'] : [],
        what,
      );
    }
  });

  it('refuses a pod of its namespaces without it, in both modes, saying which template the platform requires and what is missing', async () => {
    for (const labels of [{ [INJECT]: 'false' }, {}]) {
      const scenario = scenarioOf('team-b', labels, {}, REQUIRED);
      const [webhook, policy] = await Promise.all([admit(modes, modes.validatingWebhook, scenario), admit(modes, modes.validatingPolicy, scenario)]);
      assert.equal(webhook.allowed, false, JSON.stringify(labels));
      assert.match(
        webhook.reason ?? '',
        /template "agent" is required in namespace team-b \(its namespaceSelector takes it\) by the platform's spec.required, and the pod lacks it/,
      );
      assert.equal(policy.allowed, false, JSON.stringify(labels));
      assert.match(
        policy.reason ?? '',
        /ValidatingAdmissionPolicy 'sidecar-injector-validate-required' with binding 'sidecar-injector-validate-required-all' denied request: template "agent" is required in namespace team-b \(its namespaceSelector takes it\) by the platform's spec.required, and the pod lacks it \(container "agent", volume "agent-socket"\); the MutatingAdmissionPolicy sidecar-injector-agent adds it at CREATE/,
      );
    }
    const legacy = scenarioOf('legacy', {}, {}, REQUIRED);
    assert.equal((await admit(modes, modes.validatingPolicy, legacy)).allowed, true, 'namespace legacy is left out');
  });

  it("refuses, in both modes, a pod that brings its own container of a required sidecar's name running another image, naming template, container and both images", async () => {
    const impostor = (scenario: Obj, list: 'containers' | 'initContainers', image: string): Obj => {
      const spec = scenario['object']['spec'];
      spec[list] = [...(spec[list] ?? []), { name: 'agent', image, ...(list === 'initContainers' && { restartPolicy: 'Always' }) }];
      return scenario;
    };
    const job = (scenario: Obj): Obj => {
      scenario['object']['metadata']['ownerReferences'] = [
        { apiVersion: 'batch/v1', kind: 'Job', name: 'backup', uid: '6f1c9a50-0c43-4a52-9e2f-3a1d0a4a7d11', controller: true },
      ];
      return scenario;
    };
    const cases: [string, Obj, string][] = [
      [
        'an opted-in pod',
        impostor(scenarioOf('team-b', { [INJECT]: 'true' }, {}, REQUIRED), 'containers', 'busybox'),
        'container "agent" with image repository registry.example.com/agent (it runs busybox)',
      ],
      [
        'a pod opted out',
        impostor(scenarioOf('team-b', { [INJECT]: 'false' }, {}, REQUIRED), 'containers', 'busybox:1.36'),
        'container "agent" with image repository registry.example.com/agent (it runs busybox:1.36)',
      ],
      [
        'another registry',
        impostor(scenarioOf('team-b', { [INJECT]: 'true' }, {}, REQUIRED), 'containers', 'evil.example.com/agent:1'),
        'container "agent" with image repository registry.example.com/agent (it runs evil.example.com/agent:1)',
      ],
      [
        "a Job's pod, as a native sidecar",
        job(impostor(scenarioOf('team-b', { [INJECT]: 'false' }, {}, REQUIRED), 'initContainers', 'busybox')),
        'native sidecar "agent" with image repository registry.example.com/agent (it runs busybox)',
      ],
    ];
    for (const [what, scenario, lacks] of cases) {
      const [webhook, policy] = await assertSame(modes, what, scenario, false);
      assert.equal(webhook.allowed, false, what);
      const why = 'template "agent" is required in namespace team-b (its namespaceSelector takes it) by the platform\'s spec.required, and the pod lacks it (';
      assert.ok(webhook.reason?.includes(`${why}${lacks} (template "agent"))`), `${what}: ${webhook.reason}`);
      assert.ok(
        policy.reason?.includes(
          `ValidatingAdmissionPolicy 'sidecar-injector-validate-required' with binding 'sidecar-injector-validate-required-all' denied request: ${why}${lacks}); the MutatingAdmissionPolicy sidecar-injector-agent never replaces a container of the pod that has a sidecar's name: rename or remove the pod's own container`,
        ),
        `${what}: ${policy.reason}`,
      );
    }
  });

  it("admits, in both modes, a pod whose own container of that name is the template's but for another tag or a digest, and stores the same pod", async () => {
    for (const image of ['registry.example.com/agent:1', 'registry.example.com/agent:2', `registry.example.com/agent@sha256:${'a'.repeat(64)}`]) {
      const scenario = scenarioOf('team-b', { [INJECT]: 'false' }, {}, REQUIRED);
      // As the template renders it for team-b: the webhook refuses a required sidecar that runs otherwise (test/tenancy/required.attack.test.ts).
      scenario['object']['spec']['containers'].push({ name: 'agent', image, env: [{ name: 'AGENT_NAMESPACE', value: 'team-b' }] });
      const [webhook] = await assertSame(modes, image, scenario, true);
      assert.equal(webhook.allowed, true, `${image}: ${webhook.reason}`);
    }
  });

  it("adds it to a Job's pod as a native sidecar, and to a pod of a namespace without the required webhooks' label (policies hold every pod)", async () => {
    const job = scenarioOf('team-b', { [INJECT]: 'false' }, {}, REQUIRED);
    job['object']['metadata']['ownerReferences'] = [
      { apiVersion: 'batch/v1', kind: 'Job', name: 'backup', uid: '6f1c9a50-0c43-4a52-9e2f-3a1d0a4a7d11', controller: true },
    ];
    const [webhook] = await assertSame(modes, "a Job's pod", job, true);
    assert.equal(webhook.object?.['spec']?.['initContainers']?.[0]?.['restartPolicy'], 'Always');
    const unlabelled = await admit(modes, modes.policies, scenarioOf('team-c', { [INJECT]: 'false' }));
    assert.deepEqual(
      sidecarsOf(unlabelled).map((s) => s.split('=')[0]),
      ['agent'],
      'the one place the modes differ by design (docs/policies.md)',
    );
  });
});
