import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { HOME, eventually } from '../helpers/sidecartemplates.js';
import { assertUnhurt, DEPLOYMENT_LIMIT_MIB, sidecarTemplate, sleep, startTenantLab, verdict } from '../helpers/tenant-lab.js';

/**
 * One team attacks through its SidecarTemplates, with only the rights every namespace editor has;
 * the injector runs as the image runs it, under the Deployment's 256 MiB (the lab plays the OOM
 * killer), and another team's reviews must be answered within 1 s meanwhile, and the injector
 * ready again within 10 s of a restart.
 */
describe(
  'one team cannot hurt another through its SidecarTemplates',
  { skip: !existsSync('/proc/self/status') && "needs /proc to read the injector's RSS" },
  () => {
    it("1010 default templates in one namespace and edits in a third: other teams' reviews answered within 1 s, the newest past the namespace's budget refused", async (t) => {
      // Each default has its own container: all served, each rebuild checks 1010 defaults in one scope.
      const defaults = Array.from({ length: 1010 }, (_, i) => sidecarTemplate('crowded', `d${i}`, { default: true }));
      const lab = await startTenantLab({ objects: [sidecarTemplate(HOME, 'proxy', { default: true }), ...defaults], limitMiB: DEPLOYMENT_LIMIT_MIB });
      try {
        const team = lab.otherTeam();
        await sleep(500);
        // A third team edits its template, each a new generation: every edit was a rebuild of everything.
        for (let i = 0; i < 20; i++) {
          lab.api.applyTemplate(sidecarTemplate('editor', 'agent', { containers: [{ name: 'agent', image: `registry.example.com/agent:${i}` }] }));
          await sleep(150);
        }
        await eventually(() => lab.api.template('editor', 'agent')?.status?.observedGeneration === 20, 'the last edit observed', 100_000);
        const seen = await team.stop();
        t.diagnostic(`${await verdict(lab, seen)}; the injector's longest event loop delay ${(await lab.eventLoopMaxMs()).toFixed(0)} ms`);
        await assertUnhurt(lab, seen);
        assert.equal(lab.api.template('crowded', 'd0')?.status?.conditions?.[0]?.status, 'True');
        // Past the namespace's 4 MiB (each object charged its bytes and 4 KiB), the newest are refused, saying why.
        await eventually(() => lab.api.template('crowded', 'd1009')?.status !== undefined, 'the status of the newest default', 60_000);
        assert.match(
          lab.api.template('crowded', 'd1009')?.status?.conditions?.[0]?.message ?? '',
          /namespace crowded's objects ahead of this one \(those served as they are, then the older\) already hold \d+ of the 4194304 bytes/,
        );
      } finally {
        await lab.close();
      }
    });
  },
);
