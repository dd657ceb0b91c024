import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertSame, INJECT, scenarioOf, skip, startModes, type Modes, type Obj } from '../helpers/policy-parity.js';

/** The mandatory sidecar of test/tenancy/required.attack.test.ts, required in every namespace. */
const AGENT = {
  name: 'agent',
  image: 'registry.example.com/agent:1',
  args: ['--enforce'],
  env: [
    { name: 'MODE', value: 'enforce' },
    { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  ],
  volumeMounts: [{ name: 'agent-policy', mountPath: '/etc/agent', readOnly: true }],
};
const POLICY = { name: 'agent-policy', configMap: { name: 'agent-policy' } };
const TEMPLATE = {
  apiVersion: 'sidecar-injector.io/v1alpha1',
  kind: 'SidecarTemplate',
  metadata: { name: 'agent' },
  spec: { required: {}, containers: [AGENT], volumes: [POLICY] },
};

/** The namespace label the required webhooks are sent the pods of (manifests/components/required). */
const REQUIRED = { 'sidecar-injector.io/required': 'true' };
const WHY = 'template "agent" is required in every namespace by the platform\'s spec.required, and the pod lacks it (';
const DENIED = "ValidatingAdmissionPolicy 'sidecar-injector-validate-required' with binding 'sidecar-injector-validate-required-all' denied request: ";

/** An opted-in pod of team-a that brings `agent` under the sidecar's name, beside the template's volume (or `volumes`). */
function bringing(agent: Obj, volumes: readonly Obj[] = [POLICY]): Obj {
  const scenario = scenarioOf('team-a', { [INJECT]: 'true' });
  scenario['object']['spec']['containers'].push(structuredClone(agent));
  scenario['object']['spec']['volumes'].push(...structuredClone(volumes));
  return scenario;
}

/**
 * A team that cannot drop the platform's mandatory sidecar brings its own under the sidecar's name,
 * with the template's image: the MutatingAdmissionPolicy keeps a container the pod has, so the
 * required ValidatingAdmissionPolicy must refuse it as /validate does (requiredDrift), through the
 * apiserver's own admission plugins (kubeadmit), while what other admission adds is still allowed.
 */
describe("policy mode refuses a required sidecar of the pod's own that runs otherwise, as webhook mode does (kubeadmit)", { skip }, () => {
  let dir: string;
  let modes: Modes;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'required-drift-'));
    await writeFile(join(dir, 'agent.yaml'), JSON.stringify(TEMPLATE));
    modes = await startModes(dir, { required: true });
  });
  after(async () => {
    await modes?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const impostors: [string, Obj, readonly Obj[], string][] = [
    [
      'another command',
      { ...AGENT, command: ['sleep', 'infinity'] },
      [POLICY],
      `the pod's container has command ["sleep","infinity"] where the template has none`,
    ],
    ['no args', { ...AGENT, args: [] }, [POLICY], "the pod's container has args"],
    ['another workingDir', { ...AGENT, workingDir: '/tmp' }, [POLICY], `the pod's container has workingDir "/tmp" where the template has none`],
    [
      'an env var of the template set again later',
      { ...AGENT, env: [...AGENT.env, { name: 'MODE', value: 'off' }] },
      [POLICY],
      "the pod's container sets env var MODE otherwise",
    ],
    ['an env var of the template left out', { ...AGENT, env: AGENT.env.slice(1) }, [POLICY], "the pod's container sets env var MODE otherwise"],
    [
      'an env var of the template read from another field',
      { ...AGENT, env: [AGENT.env[0], { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } }] },
      [POLICY],
      "the pod's container sets env var POD otherwise",
    ],
    [
      'another volume at a mount path of the template',
      { ...AGENT, volumeMounts: [{ name: 'own-policy', mountPath: '/etc/agent' }] },
      [POLICY, { name: 'own-policy', emptyDir: {} }],
      "the pod's container mounts /etc/agent otherwise",
    ],
    [
      'a mount of the template made writable',
      { ...AGENT, volumeMounts: [{ name: 'agent-policy', mountPath: '/etc/agent' }] },
      [POLICY],
      "the pod's container mounts /etc/agent otherwise",
    ],
  ];
  for (const [what, agent, volume, how] of impostors) {
    it(`refuses, in both modes, the template's name and image running ${what}`, async () => {
      const [webhook, policy] = await assertSame(modes, what, bringing(agent, volume), false);
      assert.equal(webhook.allowed, false, what);
      const lacks = `${WHY}container "agent" as its template renders it (${how}`;
      assert.ok(webhook.reason?.includes(lacks), `${what}: ${webhook.reason}`);
      assert.ok(
        policy.reason?.includes(`${DENIED}${lacks}`) &&
          policy.reason.includes("never replaces a container of the pod that has a sidecar's name: rename or remove the pod's own container"),
        `${what}: ${policy.reason}`,
      );
    });
  }

  it("refuses, in both modes, the template's sidecar beside a volume of the pod's own under the template volume's name", async () => {
    const scenario = bringing(AGENT, [{ name: 'agent-policy', configMap: { name: 'team-a-permissive-policy' } }]);
    const [webhook, policy] = await assertSame(modes, 'a volume of its own', scenario, false);
    assert.ok(webhook.reason?.includes(`${WHY}volume "agent-policy" as its template defines it (template "agent"))`), webhook.reason);
    assert.ok(
      policy.reason?.includes(
        `${DENIED}${WHY}volume "agent-policy" as its template defines it); the MutatingAdmissionPolicy sidecar-injector-agent never replaces a volume of the pod that has a template volume's name: rename or remove the pod's own volume`,
      ),
      policy.reason,
    );
  });

  it("admits, in both modes, the pod the injection makes with the defaults the apiserver adds, opted in, opted out, or a Job's", async () => {
    const job = scenarioOf('team-a', { [INJECT]: 'false' }, {}, REQUIRED);
    job['object']['metadata']['ownerReferences'] = [
      { apiVersion: 'batch/v1', kind: 'Job', name: 'backup', uid: '6f1c9a50-0c43-4a52-9e2f-3a1d0a4a7d11', controller: true },
    ];
    const cases: [string, Obj][] = [
      ['an opted-in pod', scenarioOf('team-a', { [INJECT]: 'true' })],
      ['an opted-out pod', scenarioOf('team-a', { [INJECT]: 'false' }, {}, REQUIRED)],
      ["a Job's pod", job],
    ];
    for (const [what, scenario] of cases) {
      const [webhook, policy] = await assertSame(modes, what, scenario, true);
      assert.equal(webhook.allowed, true, `${what}: ${webhook.reason}`);
      assert.equal(policy.allowed, true, `${what}: ${policy.reason}`);
    }
  });

  it('admits, in both modes, the sidecar with what other admission adds or rewrites: env vars, mounts, defaults, resources, probes, a pinned digest', async () => {
    const agent = structuredClone(AGENT) as Obj;
    agent['env'].push({ name: 'DD_AGENT_HOST', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } });
    agent['env'][1].valueFrom.fieldRef.apiVersion = 'v1';
    agent['volumeMounts'].push({ name: 'data', mountPath: '/data', readOnly: true });
    agent['resources'] = { requests: { cpu: '25m', memory: '40Mi' } };
    agent['readinessProbe'] = { httpGet: { path: '/app-health/agent/readyz', port: 15020 } };
    agent['image'] = `${AGENT.image}@sha256:${'a'.repeat(64)}`;
    agent['imagePullPolicy'] = 'IfNotPresent';
    agent['terminationMessagePath'] = '/dev/termination-log';
    const scenario = bringing(agent, [{ ...POLICY, configMap: { ...POLICY.configMap, defaultMode: 420 } }]);
    const [webhook, policy] = await assertSame(modes, 'additions and rewrites', scenario, true);
    assert.equal(webhook.allowed, true, webhook.reason);
    assert.equal(policy.allowed, true, policy.reason);
  });
});

/**
 * A required sidecar whose args read {{ pod.name }}: the MutatingAdmissionPolicy renders it with a
 * controller's pod's generateName, and the apiserver names the pod before the validating policy,
 * so the policy does not compare that field (docs/policies.md) and still compares the others.
 */
describe("policy mode admits a required sidecar that reads the pod's name on a controller's pod (kubeadmit)", { skip }, () => {
  const NAMED = { ...AGENT, args: ['--enforce', '--pod={{ pod.name }}'] };
  let dir: string;
  let modes: Modes;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'required-named-'));
    await writeFile(join(dir, 'agent.yaml'), JSON.stringify({ ...TEMPLATE, spec: { ...TEMPLATE.spec, containers: [NAMED] } }));
    modes = await startModes(dir, { required: true });
  });
  after(async () => {
    await modes?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('admits, in both modes, the pod the injection makes, once the apiserver has named it', async () => {
    const [webhook, policy] = await assertSame(modes, 'an opted-in pod', scenarioOf('team-a', { [INJECT]: 'true' }), true);
    assert.equal(webhook.allowed, true, webhook.reason);
    assert.equal(policy.allowed, true, policy.reason);
    assert.match(JSON.stringify(policy.object?.['spec']?.['containers']), /--pod=web-7d9f8b6c5-"/, 'rendered with the generateName');
  });

  it("still refuses, in both modes, an impostor under the sidecar's name that runs another command", async () => {
    const impostor = { ...NAMED, args: ['--enforce', '--pod=web-7d9f8b6c5-'], command: ['sleep', 'infinity'] };
    const [webhook, policy] = await assertSame(modes, 'another command', bringing(impostor), false);
    assert.match(webhook.reason ?? '', /the pod's container has command \["sleep","infinity"\]/);
    assert.match(
      policy.reason ?? '',
      /container "agent" as its template renders it \(the pod's container has command \["sleep","infinity"\] where the template has none\)/,
    );
  });
});
