import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Options } from '../../src/config/config.js';
import { admit } from '../helpers/apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { startServeProcess, type ServeProcess } from '../helpers/serve-process.js';
import { makeTestCerts } from '../helpers/tls.js';

/** The memory limit of the Deployment in manifests/install.yaml. */
const DEPLOYMENT_LIMIT = 256 * 1024 * 1024;
const MIB = 1024 * 1024;

let server: ServeProcess;
let url: string;
let ca: string;

// The server runs in a child process, so its peak RSS (VmHWM) is its own.
before(async () => {
  const certs = await makeTestCerts();
  ca = certs.ca.certPem;
  server = await startServeProcess(['--cert-dir', certs.certDir, '--log-level', 'info']);
  url = server.url;
});
after(() => server.kill());

function peakRss(): number {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) * 1024;
}

/** A pod of `n` application containers, about `bytes` of JSON in all. */
function manyContainers(n: number, bytes: number): object {
  const filler = 'x'.repeat(Math.max(0, Math.floor(bytes / n) - 120));
  return optedInPod({ spec: { containers: Array.from({ length: n }, (_, i) => ({ name: `c${i}`, image: 'nginx:1.27', args: [filler] })) } });
}

describe('memory of a review', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  it('keeps peak RSS under the Deployment limit with 2.8 MiB pods of many containers, and serves a valid review after', async () => {
    const idle = peakRss();
    const huge = JSON.stringify(podReview(manyContainers(90_000, 2.8 * MIB)));
    assert.ok(huge.length > 2.7 * MIB);
    const atLimit = manyContainers(Options.maxContainers.schema.default, 2.8 * MIB);
    // Several at once, as an apiserver spreading a big rollout would send them.
    const answers = await Promise.all([
      ...Array.from({ length: 2 }, () => httpsRequest(`${url}/mutate`, huge, { ca })),
      ...Array.from({ length: 2 }, () => admit(url, ca, atLimit).then((a) => ({ status: 200, text: '', json: () => ({ response: a.response }) }))),
    ]);
    // 90 000 containers, 270 000 keys (--max-json-keys) and 630 000 JSON nodes (--max-json-nodes):
    // refused before it is parsed.
    for (const a of answers.slice(0, 2)) {
      assert.equal(a.status, 400);
      assert.match(a.json().message, /more than \d+ (JSON nodes|keys in all) \(.*--max-json-(nodes|keys)\)/);
    }
    const responses = answers.map((a) => (a.status === 200 ? a.json().response : undefined));
    for (const r of responses.slice(2)) {
      assert.equal(r.allowed, true, JSON.stringify(r.status));
      assert.ok(Buffer.from(r.patch, 'base64').length < 1024 * 1024);
    }
    const peak = peakRss();
    // The child runs through tsx, which alone holds about 100 MiB; the built server holds less.
    assert.ok(peak < DEPLOYMENT_LIMIT, `peak RSS ${(peak / MIB).toFixed(0)} MiB (idle ${(idle / MIB).toFixed(0)} MiB)`);
    assert.ok(peak - idle < 128 * MIB, `the reviews grew peak RSS by ${((peak - idle) / MIB).toFixed(0)} MiB`);
    const { response } = await admit(url, ca, optedInPod());
    assert.equal(response.allowed, true);
  });
});
