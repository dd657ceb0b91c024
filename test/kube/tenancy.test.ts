import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { DEPLOYMENT_LIMIT_MIB, HOME, sidecarTemplate, startTenantLab, type TenantLab } from '../helpers/tenant-lab.js';

/**
 * One team attacks through its SidecarTemplates, with only the rights every namespace editor has;
 * the injector runs as the image runs it, under the Deployment's 256 MiB (the lab plays the OOM
 * killer), and another team's reviews must be answered within 1 s meanwhile, and the injector
 * ready again within 10 s of a restart.
 */
const REVIEW_BOUND_MS = 1000;
const READY_BOUND_MS = 10_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function eventually(check: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (check()) return;
    await sleep(100);
  }
  assert.fail(`timed out waiting for: ${what}`);
}

/** A valid template of `envVars` env vars (~130 bytes each): 10,000 make 1.3 MB, which etcd takes. */
function bigTemplate(namespace: string, name: string, envVars: number, extra: object = {}): any {
  const env = Array.from({ length: envVars }, (_, i) => ({ name: `VAR_${i}`, value: `${name}-${'x'.repeat(100)}` }));
  return sidecarTemplate(namespace, name, { containers: [{ name, image: `registry.example.com/${name}:1`, env }], ...extra });
}

/** What the other team's reviews, the peak RSS and the lab's OOM killer say, as one line for the test's diagnostics. */
async function verdict(lab: TenantLab, seen: { latencies: readonly number[]; failures: readonly string[] }): Promise<string> {
  const sorted = [...seen.latencies].sort((a, b) => a - b);
  const at = (q: number): string => (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(0);
  return `${seen.latencies.length} other-team reviews, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, slowest ${at(1)} ms (${sorted.filter((l) => l >= REVIEW_BOUND_MS).length} over ${REVIEW_BOUND_MS} ms), ${seen.failures.length} failed; peak RSS ${(await lab.peakRssMiB()).toFixed(0)} MiB as the image (the child: ${lab.idleRssMiB.toFixed(0)} idle, ${(await lab.rawPeakRssMiB()).toFixed(0)} peak); OOM kills ${lab.oomKills}`;
}

async function assertUnhurt(lab: TenantLab, seen: { latencies: readonly number[]; failures: readonly string[] }): Promise<void> {
  assert.equal(lab.oomKills, 0, 'killed over the memory limit');
  assert.deepEqual(seen.failures.slice(0, 3), [], 'every other-team review allowed');
  assert.ok(seen.latencies.length > 0);
  assert.ok(Math.max(...seen.latencies) < REVIEW_BOUND_MS, `slowest other-team review ${Math.max(...seen.latencies).toFixed(0)} ms`);
  assert.ok((await lab.peakRssMiB()) < DEPLOYMENT_LIMIT_MIB);
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
        await eventually(() => lab.api.template('editor', 'agent')?.status?.observedGeneration === 20, 'the last edit observed');
        const seen = await team.stop();
        t.diagnostic(`${await verdict(lab, seen)}; the injector's longest event loop delay ${(await lab.eventLoopMaxMs()).toFixed(0)} ms`);
        await assertUnhurt(lab, seen);
        assert.equal(lab.api.template('crowded', 'd0')?.status?.conditions?.[0]?.status, 'True');
        // Past the namespace's 4 MiB (each object charged its bytes and 4 KiB), the newest are refused, saying why.
        await eventually(() => lab.api.template('crowded', 'd1009')?.status !== undefined, 'the status of the newest default');
        assert.match(
          lab.api.template('crowded', 'd1009')?.status?.conditions?.[0]?.message ?? '',
          /namespace crowded's older objects already hold \d+ of the 4194304 bytes/,
        );
      } finally {
        await lab.close();
      }
    });
  },
);
