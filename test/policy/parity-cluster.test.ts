import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { assertSame, INJECT, scenarioOf, sidecarsOf, skip, startModes, type Modes } from '../helpers/policy-parity.js';
import { HOME, sct } from '../helpers/sidecartemplates.js';

const TEMPLATES = 'sidecar-injector.io/templates';
const REV = 'sidecar-injector.io/rev';

/**
 * The cluster's SidecarTemplates (the API stand-in) compiled view by view, against the real server
 * serving the same objects with --templates-source cluster: a team's templates in its namespace, the
 * cluster-wide ones elsewhere, the team's shadowing a cluster-wide one of the same name.
 */
describe('policy mode stores the pods webhook mode stores, with SidecarTemplate objects per namespace (kubeadmit)', { skip }, () => {
  let api: FakeApiServer;
  let modes: Modes;
  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(
      sct(HOME, 'proxy', 'registry.example.com/proxy:1', {
        default: true,
        env: [{ name: 'PROXY_NAMESPACE', value: '{{ namespace }}' }],
        volumes: [{ name: 'proxy-certs', emptyDir: {} }],
      }),
    );
    api.applyTemplate(sct(HOME, 'agent', 'registry.example.com/agent:1'));
    api.applyTemplate(sct('team-a', 'mesh', 'registry.example.com/mesh:1', { default: true, placement: 'first' }));
    api.applyTemplate(sct('team-a', 'agent', 'registry.example.com/team-a-agent:1', { volumeMounts: [{ name: 'data', mountPath: '/agent-data' }] }));
    modes = await startModes('', { kubeconfig: api.kubeconfig });
  });
  after(async () => {
    await modes?.close();
    await api?.close();
  });

  it("a pod of team-a gets team-a's defaults; the same pod in team-b the cluster-wide ones", async () => {
    const [inA] = await assertSame(modes, 'team-a, defaults', scenarioOf('team-a', { [INJECT]: 'true' }), true);
    assert.deepEqual(sidecarsOf(inA), ['mesh=registry.example.com/mesh:1']);
    const [inB] = await assertSame(modes, 'team-b, defaults', scenarioOf('team-b', { [INJECT]: 'true' }), true);
    assert.deepEqual(sidecarsOf(inB), ['proxy=registry.example.com/proxy:1']);
  });

  it("a team's template shadows the cluster-wide one of its name in its namespace only, in the webhook's order with a cluster-wide one", async () => {
    for (const names of ['agent,proxy', 'proxy,agent,mesh']) {
      const [inA] = await assertSame(modes, `team-a, ${names}`, scenarioOf('team-a', { [INJECT]: 'true' }, { [TEMPLATES]: names }), true);
      assert.ok(sidecarsOf(inA).includes('agent=registry.example.com/team-a-agent:1'), sidecarsOf(inA).join(' '));
    }
    const [inB] = await assertSame(modes, 'team-b, agent', scenarioOf('team-b', { [INJECT]: 'true' }, { [TEMPLATES]: 'agent' }), true);
    assert.deepEqual(sidecarsOf(inB), ['agent=registry.example.com/agent:1']);
  });

  it("a namespace opted in by its label gets its view too; a pod naming another namespace's template is refused in both modes", async () => {
    await assertSame(modes, 'team-a, namespace opt-in', scenarioOf('team-a', {}, {}, { [INJECT]: 'true' }), true);
    const [webhook, policy] = await assertSame(modes, 'team-b names mesh', scenarioOf('team-b', { [INJECT]: 'true' }, { [TEMPLATES]: 'mesh' }), false);
    assert.equal(webhook.allowed, false);
    assert.match(
      policy.reason ?? '',
      /ValidatingAdmissionPolicy 'sidecar-injector-validate' with binding 'sidecar-injector-validate-pod' denied request: unknown sidecar template\(s\) "mesh"/,
    );
  });
});

/** A revision's install: its webhook configurations (manifests/components/revision) against its policies. */
describe('policy mode stores the pods webhook mode stores, for a revision (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('templates', { revision: 'canary' });
  });
  after(async () => modes?.close());

  it('takes the pods labelled with the revision, and the unlabelled pods of namespaces labelled with it; leaves the others alone', async () => {
    const cases: [string, ReturnType<typeof scenarioOf>, boolean][] = [
      ['a pod labelled rev=canary', scenarioOf('shop', { [INJECT]: 'true', [REV]: 'canary' }), true],
      [
        'a pod labelled rev=canary in a namespace of another revision',
        scenarioOf('shop', { [INJECT]: 'true', [REV]: 'canary' }, {}, { [REV]: 'stable' }),
        true,
      ],
      ['an unlabelled pod of a namespace labelled rev=canary and inject=true', scenarioOf('shop', {}, {}, { [INJECT]: 'true', [REV]: 'canary' }), true],
      [
        'a pod labelled inject=true in a namespace labelled rev=canary',
        scenarioOf('shop', { [INJECT]: 'true' }, { [TEMPLATES]: 'proxy' }, { [REV]: 'canary' }),
        true,
      ],
      [
        'a pod of another revision in a namespace labelled rev=canary',
        scenarioOf('shop', { [INJECT]: 'true', [REV]: 'stable' }, {}, { [REV]: 'canary' }),
        false,
      ],
      ['a pod without the revision', scenarioOf('shop', { [INJECT]: 'true' }), false],
    ];
    for (const [what, scenario, injected] of cases) await assertSame(modes, what, scenario, injected);
  });
});
