/**
 * The time kubeadmit (the apiserver's admission code) spends on a typical opted-in pod with the
 * compiled policies, against the webhook: the real server over TLS, the installed configurations.
 * Each mode runs `ROUNDS` CREATEs, interleaved, one kubeadmit process each; the figure per mode is
 * the median wall time of the process less the median of a process with nothing to run (its start
 * and informer sync), and for the webhook also the round trips kubeadmit timed on the wire.
 *   node --import tsx scripts/policy-bench.ts   (KUBEADMIT=... or ~/.cache/kubeadmit/kubeadmit)
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createCA, issueServingCert } from '../src/certs/pki.js';
import { serveConfig } from '../src/cli/serve-flags.js';
import { createLogger } from '../src/log.js';
import { serve } from '../src/main.js';
import { compilePolicies } from '../src/policy/compile.js';
import { loadTemplateSet } from '../src/templates/load.js';
import { admissionView } from '../test/corpus/admission-view.js';
import { readYaml11 } from '../test/corpus/corpus.js';

const ROUNDS = Number(process.env['ROUNDS'] ?? 15);
const binary = process.env['KUBEADMIT'] || join(homedir(), '.cache', 'kubeadmit', 'kubeadmit');
const dir = await mkdtemp(join(tmpdir(), 'policy-bench-'));
const ca = await createCA('bench-ca', 1);
const serving = await issueServingCert(ca, { dnsNames: ['sidecar-injector.sidecar-injector.svc'], ipAddresses: ['127.0.0.1'], validityDays: 1 });
await writeFile(join(dir, 'tls.crt'), serving.certPem);
await writeFile(join(dir, 'tls.key'), serving.keyPem);
await writeFile(join(dir, 'ca.crt'), ca.certPem);
const running = await serve(
  serveConfig(['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', dir, '--templates-dir', 'templates', '--log-level', 'silent'], {}),
  createLogger('silent'),
);
const list = (items: readonly unknown[]): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
const webhooks = readYaml11('manifests/install.yaml').filter((o) => String(o['kind']).endsWith('WebhookConfiguration'));
await writeFile(join(dir, 'webhook.json'), list(webhooks));
await writeFile(join(dir, 'policy.json'), list(compilePolicies(await loadTemplateSet('templates'), { namespace: 'sidecar-injector' }).objects));
await writeFile(join(dir, 'none.json'), list([]));
const view = admissionView(readYaml11('examples/deployment.yaml')[0]!, [], 'shop');
await writeFile(join(dir, 'scenario.json'), JSON.stringify({ namespace: 'shop', namespaces: { shop: { labels: {} } }, object: view.pod }));

const modes = ['none', 'policy', 'webhook'] as const;
const wall: Record<string, number[]> = { none: [], policy: [], webhook: [] };
const wire: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  for (const mode of modes) {
    const start = process.hrtime.bigint();
    const { stdout } = await promisify(execFile)(
      binary,
      ['--scenario', join(dir, 'scenario.json'), '--config', join(dir, `${mode}.json`), '--addr', `127.0.0.1:${running.port}`, '--ca', join(dir, 'ca.crt')],
      { maxBuffer: 1 << 26 },
    );
    wall[mode]!.push(Number(process.hrtime.bigint() - start) / 1e6);
    const res = JSON.parse(stdout) as { allowed: boolean; calls: { ms: number }[]; object?: { spec: { containers: unknown[] } } };
    if (!res.allowed) throw new Error(`${mode}: refused`);
    if (mode !== 'none' && res.object!.spec.containers.length < 2) throw new Error(`${mode}: not injected`);
    if (mode === 'webhook') wire.push(res.calls.reduce((sum, c) => sum + c.ms, 0));
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const base = median(wall.none!);
console.log(`kubeadmit process, nothing to run: ${base.toFixed(0)} ms (median of ${ROUNDS})`);
console.log(`policies (2 mutating + 1 validating): +${(median(wall.policy!) - base).toFixed(1)} ms`);
console.log(`webhook (/mutate + /validate): +${(median(wall.webhook!) - base).toFixed(1)} ms, of which on the wire ${median(wire).toFixed(1)} ms`);
await running.close();
await rm(dir, { recursive: true, force: true });
