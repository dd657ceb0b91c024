import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { after, describe, it } from 'node:test';
import { httpsRequest } from '../helpers/client.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { HOME } from '../helpers/sidecartemplates.js';
import { DEPLOYMENT_LIMIT_MIB, sidecarTemplate, startTenantLab, type TenantLab } from '../helpers/tenant-lab.js';

// One team attacks through what it may write (its SidecarTemplates, its pods), another team's
// reviews go on: the injector as the image runs it (--max-semi-space-size=4, --templates-source
// cluster), the OOM killer played at the Deployment's 256 MiB. Each attack must leave the replica
// alive under that limit and answer the other team within 1 s; what the attacker's pods get is
// said by the unit tests (test/templates/template.test.ts, test/inject/keys.test.ts,
// test/admission/verdict.test.ts), and what a template's renderings hold by
// test/templates/template.test.ts "renderings of many pods", in process: at the 1 MiB patch limit
// each review leaves megabytes for V8 to collect, which a child's peak RSS measures too.

const TEAM = 'team-a';
const ONE_SECOND = 1000;

/** The cluster-wide default every team's pods get. */
const platform = sidecarTemplate(HOME, 'proxy', { default: true });

/** The attacking team's reviews of `pods`, one after another; returns each AdmissionResponse. */
async function attack(lab: TenantLab, pods: readonly object[]): Promise<any[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const answers: any[] = [];
  try {
    for (const pod of pods) {
      const res = await httpsRequest(`${lab.url}/mutate`, JSON.stringify(podReview(pod, { namespace: TEAM })), { ca: lab.ca, agent });
      assert.equal(res.status, 200, res.text.slice(0, 300));
      answers.push(res.json().response);
    }
  } finally {
    agent.destroy();
  }
  return answers;
}

/** Resolves once a pod naming `template` is injected: the team's objects are compiled and served (their compilation is not this attack). */
async function served(lab: TenantLab, template: string): Promise<void> {
  for (const start = Date.now(); Date.now() - start < 60_000;) {
    const [answer] = await attack(lab, [teamPod(template)]);
    if (answer.allowed === true) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`template ${template} not served within 60 s`);
}

/** Runs `attack` while another team sends reviews; asserts the bounds on both. */
async function underAttack<T>(lab: TenantLab, run: () => Promise<T>): Promise<T> {
  const team = lab.otherTeam();
  // The other team's reviews are under way before the attack starts.
  await new Promise((r) => setTimeout(r, 300));
  const outcome = await run().then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  const seen = await team.stop();
  if ('error' in outcome) throw outcome.error;
  const peak = await lab.peakRssMiB();
  assert.equal(lab.oomKills, 0, `killed at ${DEPLOYMENT_LIMIT_MIB} MiB (peak ${peak.toFixed(0)} MiB)`);
  assert.ok(peak < DEPLOYMENT_LIMIT_MIB, `peak RSS ${peak.toFixed(0)} MiB`);
  assert.deepEqual(seen.failures, []);
  assert.ok(seen.latencies.length > 0);
  const slowest = Math.max(...seen.latencies);
  assert.ok(slowest < ONE_SECOND, `another team's slowest review took ${slowest.toFixed(0)} ms`);
  return outcome.value;
}

/** A pod of the attacking team naming its templates. */
function teamPod(templates: string, annotations: Record<string, string> = {}, name?: string): object {
  return optedInPod({ annotations: { 'sidecar-injector.io/templates': templates, ...annotations }, ...(name !== undefined && { name }) });
}

describe('one team cannot hurt another through rendering and per-pod work', { concurrency: false }, () => {
  let lab: TenantLab | undefined;
  after(() => lab?.close());

  it('placeholder amplification: a pod value read 2000 times is refused before it is rendered; 199 KB of unknown app-containers give a short warning', async () => {
    const args = Array.from({ length: 2000 }, () => "{{ pod.annotations['b'] }}");
    const amp = { ...sidecarTemplate(TEAM, 'amp'), spec: { containers: [{ name: 'amp', image: 'registry.example.com/amp:1', args }] } };
    const env = {
      ...sidecarTemplate(TEAM, 'env'),
      spec: { containers: [{ name: 'env', image: 'registry.example.com/env:1' }], env: [{ name: 'A', value: '1' }] },
    };
    lab = await startTenantLab({ objects: [platform, amp, env], limitMiB: DEPLOYMENT_LIMIT_MIB });
    await served(lab, 'env');
    const names = Array.from({ length: 10_000 }, (_, i) => `unknown-container-${i}`).join(',');
    const pods = [
      ...[0, 1, 2].map((i) => teamPod('amp', { b: 'x'.repeat(250_000) }, `amp-${i}`)),
      teamPod('env', { 'sidecar-injector.io/app-containers': names }, 'env-0'),
    ];
    const answers = await underAttack(lab, () => attack(lab!, pods));
    for (const answer of answers.slice(0, 3)) {
      assert.equal(answer.allowed, false);
      assert.match(
        answer.status.message,
        /^template "amp" would add more than 1048576 bytes to the pod \(--max-patch-kib\): \{\{ pod\.annotations\['b'\] \}\} expands to 250000 bytes for this pod, 2000 times in the template/,
      );
    }
    const listed = answers[3];
    assert.equal(listed.allowed, true);
    const chars = (listed.warnings as string[]).reduce((n, w) => n + w.length, 0);
    assert.ok(chars <= 2048, `${chars} characters of warnings`);
    await lab.close();
    lab = undefined;
  });

  // 150 templates rather than the 500 of the attack as found: every key by every name took 2.5 s
  // a review with 150 already, and a replica starts 500 objects too slowly for a test on a shared machine.
  it('typo warnings: 2800 keys under a template prefix against 150 templates named alike', async () => {
    const prefix = 'a'.repeat(56);
    const keys = Array.from({ length: 2800 }, (_, i) => `${prefix}-xyzw.sidecar-injector.io/k${i}`);
    const named = Array.from({ length: 150 }, (_, i) =>
      sidecarTemplate(TEAM, `${prefix}-${i}`, i === 0 ? { annotations: Object.fromEntries(keys.map((k) => [k, 'v'])) } : {}),
    );
    lab = await startTenantLab({ objects: [platform, ...named], limitMiB: DEPLOYMENT_LIMIT_MIB });
    await served(lab, `${prefix}-149`);
    const pods = [0, 1].map((i) => teamPod(`${prefix}-1`, Object.fromEntries(keys.map((k) => [k, 'v'])), `typo-${i}`));
    const answers = await underAttack(lab, () => attack(lab!, pods));
    for (const answer of answers) assert.equal(answer.allowed, true, answer.status?.message);
    await lab.close();
    lab = undefined;
  });
});
