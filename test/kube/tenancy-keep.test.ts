import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { HOME, eventually } from '../helpers/sidecartemplates.js';
import { assertUnhurt, DEPLOYMENT_LIMIT_MIB, sidecarTemplate, sleep, startTenantLab, verdict } from '../helpers/tenant-lab.js';

/** A valid object of ~60 KB: two env values of 30,000 characters (the CRD takes 32 KiB a string). */
function nearLimit(namespace: string, name: string): any {
  const env = ['A', 'B'].map((n) => ({ name: n, value: `${name}-`.padEnd(30_000, n.toLowerCase()) }));
  return sidecarTemplate(namespace, name, { containers: [{ name, image: `registry.example.com/${name}:1`, env }] });
}

/**
 * One team creates objects each under the 64 KiB the injector compiles, far past its namespace's
 * budget, with no ResourceQuota: what the injector keeps and compiles is bounded by the budget's
 * bytes, not by the count of objects. The injector runs as the image runs it, under the
 * Deployment's 256 MiB (the lab plays the OOM killer); another team's reviews are timed meanwhile.
 */
describe(
  'one team cannot exhaust the injector with many objects under the size limit',
  { skip: !existsSync('/proc/self/status') && "needs /proc to read the injector's RSS" },
  () => {
    it('500 valid objects of 60 KB in one namespace: those past its 4 MiB refused and never compiled, the injector under 256 MiB', async (t) => {
      const lab = await startTenantLab({ objects: [sidecarTemplate(HOME, 'proxy', { default: true })], limitMiB: DEPLOYMENT_LIMIT_MIB });
      try {
        const team = lab.otherTeam();
        await sleep(500);
        const count = 500;
        for (let i = 0; i < count; i++) {
          lab.api.applyTemplate(nearLimit('hoarder', `o-${String(i).padStart(3, '0')}`));
          if (i % 20 === 19) await sleep(100);
        }
        const loaded = (i: number): any => lab.api.template('hoarder', `o-${String(i).padStart(3, '0')}`)?.status?.conditions?.[0];
        await eventually(() => lab.oomKills > 0 || loaded(count - 1)?.status === 'False', 'the newest object refused in its status', 100_000);
        const seen = await team.stop();
        t.diagnostic(`${await verdict(lab, seen)}; the injector's longest event loop delay ${(await lab.eventLoopMaxMs()).toFixed(0)} ms`);
        await assertUnhurt(lab, seen);
        assert.equal(loaded(0)?.status, 'True', 'the oldest object served');
        assert.match(loaded(count - 1).message, /namespace hoarder's objects .* already hold \d+ of the 4194304 bytes/);
      } finally {
        await lab.close();
      }
    });
  },
);
