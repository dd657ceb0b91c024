import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultPodLimits } from '../../src/policy/bounds.js';
import { compilePolicies } from '../../src/policy/compile.js';
import { findCelcost, measureCost, problemLines, worstExpression } from '../../src/policy/cost.js';
import { loadTemplateSet } from '../../src/templates/load.js';

const found = findCelcost();
const skip = 'absent' in found ? found.absent : false;
const binary = 'binary' in found ? found.binary : '';

/** Template items of each kind: env vars, mounts and volumes (far more than a real mandatory sidecar has). */
const ITEMS = 100;
const ENV = Array.from({ length: ITEMS }, (_, i) => ({ name: `E${i}`, value: `v${i}` }));
const MOUNTS = Array.from({ length: ITEMS }, (_, i) => ({ name: `vol${i}`, mountPath: `/m/${i}`, readOnly: true }));
const VOLUMES = Array.from({ length: ITEMS }, (_, i) => ({ name: `vol${i}`, configMap: { name: `c${i}` } }));
const AGENT = { name: 'agent', image: 'registry.example.com/agent:1', args: ['--enforce'], env: ENV, volumeMounts: MOUNTS };

/** A pod whose agent and volumes are as wide as the webhook's default bounds let them be, the template's items last, each set otherwise. */
function widest(): object {
  const { envPerContainer, mountsPerContainer, volumes } = DefaultPodLimits;
  const env = [...Array.from({ length: envPerContainer - ITEMS }, (_, i) => ({ name: `X${i}`, value: 'x' })), ...ENV.map((e) => ({ ...e, value: 'other' }))];
  const mounts = [
    ...Array.from({ length: mountsPerContainer - ITEMS }, (_, i) => ({ name: 'vol0', mountPath: `/x/${i}` })),
    ...MOUNTS.map((m) => ({ ...m, readOnly: false })),
  ];
  const own = Array.from({ length: volumes - ITEMS }, (_, i) => ({ name: `own${i}`, emptyDir: {} }));
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'widest' },
    spec: {
      containers: [
        { name: 'app', image: 'nginx:1.27' },
        { ...AGENT, env, volumeMounts: mounts },
      ],
      volumes: [...own, ...VOLUMES.map((v) => ({ ...v, configMap: { name: 'other' } }))],
    },
  };
}

/**
 * The required policy's checks of how a sidecar runs (src/policy/validation.ts, driftVariables)
 * against the apiserver's limits (celcost): a template of many env vars, mounts and volumes on the
 * widest pod the bounds policy lets through stays within the per-expression and per-policy costs
 * and the expressions' length, and is still refused, not failed.
 */
describe("the required policy's checks of a sidecar's command, env, mounts and volumes within the apiserver's limits (celcost)", { skip }, () => {
  let dir: string;
  let policy: Record<string, unknown>;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'required-cost-'));
    const template = {
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name: 'agent' },
      spec: { required: {}, containers: [AGENT], volumes: VOLUMES },
    };
    await writeFile(join(dir, 'agent.yaml'), JSON.stringify(template));
    const { objects } = compilePolicies(await loadTemplateSet(dir), { namespace: 'sidecar-injector' });
    policy = objects.find((o: any) => o.metadata.name === 'sidecar-injector-validate-required') as Record<string, unknown>;
  });
  after(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('refuses the widest pod within the limits, and admits the template as written', async () => {
    const written = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'written' },
      spec: { containers: [{ name: 'app', image: 'nginx:1.27' }, AGENT], volumes: VOLUMES },
    };
    const r = await measureCost(binary, [policy], [widest(), written], { namespace: 'shop' });
    const [wide, ok] = r.policies[0]!.pods;
    assert.deepEqual(problemLines(r), []);
    assert.equal(wide!.error, undefined);
    assert.match(
      (wide!.denials ?? []).join('\n'),
      /container "agent" as its template renders it \(the pod's container sets env var E0 otherwise\), volume "vol0" as its template defines it/,
    );
    const worst = worstExpression(r.policies[0]!, 0)!;
    assert.ok(worst.cost < r.limits.perCall / 2, `${worst.field}: ${worst.cost} units`);
    assert.ok(wide!.cost < r.limits.perPolicy / 2, `${wide!.cost} units`);
    assert.equal(ok!.error, undefined);
    assert.deepEqual(ok!.denials ?? [], [], 'the template as written is admitted');
  });
});
