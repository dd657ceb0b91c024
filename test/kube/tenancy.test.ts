import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { HOME, eventually } from '../helpers/sidecartemplates.js';
import { assertUnhurt, DEPLOYMENT_LIMIT_MIB, READY_BOUND_MS, sidecarTemplate, sleep, startTenantLab, verdict } from '../helpers/tenant-lab.js';

/**
 * One team attacks through its SidecarTemplates, with only the rights every namespace editor has;
 * the injector runs as the image runs it, under the Deployment's 256 MiB (the lab plays the OOM
 * killer), and another team's reviews must be answered within 1 s meanwhile, and the injector
 * ready again within 10 s of a restart.
 */
/** A valid template of `envVars` env vars (~130 bytes each): 10,000 make 1.3 MB, which etcd takes. */
function bigTemplate(namespace: string, name: string, envVars: number, extra: object = {}): any {
  const env = Array.from({ length: envVars }, (_, i) => ({ name: `VAR_${i}`, value: `${name}-${'x'.repeat(100)}` }));
  return sidecarTemplate(namespace, name, { containers: [{ name, image: `registry.example.com/${name}:1`, env }], ...extra });
}

describe(
  'one team cannot hurt another through its SidecarTemplates',
  { skip: !existsSync('/proc/self/status') && "needs /proc to read the injector's RSS" },
  () => {
    it('22 valid objects of 1.3 MB that no pod selects: each refused in its status, the injector under 256 MiB, and ready again after a restart', async (t) => {
      const lab = await startTenantLab({ objects: [sidecarTemplate(HOME, 'proxy', { default: true })], limitMiB: DEPLOYMENT_LIMIT_MIB });
      try {
        const objects = Array.from({ length: 22 }, (_, i) => bigTemplate('attacker', `big-${i}`, 10_000));
        const team = lab.otherTeam();
        await sleep(500);
        for (const o of objects) {
          lab.api.applyTemplate(o);
          await sleep(200);
        }
        const loaded = (i: number): any => lab.api.template('attacker', `big-${i}`)?.status?.conditions?.[0];
        await eventually(
          () => lab.oomKills > 0 || Array.from({ length: 22 }, (_, i) => loaded(i)).every((c) => c?.status === 'False'),
          'every big object refused in its status',
          60_000,
        );
        const seen = await team.stop();
        t.diagnostic(`${await verdict(lab, seen)}; the injector's longest event loop delay ${(await lab.eventLoopMaxMs()).toFixed(0)} ms`);
        await assertUnhurt(lab, seen);
        assert.match(loaded(0).message, /over the injector's limit of 65536 bytes as JSON/);

        const ms = await lab.restart();
        t.diagnostic(`ready ${ms} ms after the restart; peak RSS ${(await lab.peakRssMiB()).toFixed(0)} MiB`);
        assert.ok(ms < READY_BOUND_MS, `ready ${ms} ms after the restart`);
        assert.equal(lab.oomKills, 0);
      } finally {
        await lab.close();
      }
    });
  },
);
