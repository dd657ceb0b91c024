import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { admit } from '../helpers/apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { openTls, rawPost } from '../helpers/raw.js';
import { optedInPod, podReview } from '../helpers/review.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { makeTestCerts } from '../helpers/tls.js';

/** The memory limit of the Deployment (manifests/deployment.yaml). */
const DEPLOYMENT_LIMIT_MIB = 256;
/** A sidecar whose env holds this many bytes makes every answer about 1 MB: under the patch limit, over a socket's worth. */
const BIG_VALUE_BYTES = 700_000;
const CLIENTS = 30;
const PIPELINED = 8;
const MAX_INFLIGHT = 4;

/** A template set with one default template whose answer is large, so that unread answers weigh. */
async function bigTemplates(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-big-'));
  const value = 'x'.repeat(BIG_VALUE_BYTES);
  await writeFile(
    join(dir, 'big.yaml'),
    `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: big\nspec:\n  default: true\n  containers:\n    - name: big\n      image: registry.example/big:1\n      env:\n        - name: BIG\n          value: "${value}"\n`,
  );
  return dir;
}

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('clients that never read their answers', { skip: !existsSync('/proc/self/status') && "needs /proc to read the server's RSS" }, () => {
  it(`hold at most --max-inflight answers: ${CLIENTS} clients pipelining ${PIPELINED} reviews each keep the server under the Deployment's ${DEPLOYMENT_LIMIT_MIB} MiB, and a valid review succeeds after`, async (t) => {
    const templatesDir = await bigTemplates();
    // A child process, so its resident memory is its own.
    const certs = await makeTestCerts();
    const ca = certs.ca.certPem;
    const server = await startServeProcess([
      '--cert-dir',
      certs.certDir,
      '--log-level',
      'info',
      '--templates-dir',
      templatesDir,
      '--max-inflight',
      String(MAX_INFLIGHT),
      '--request-timeout',
      '3',
    ]);
    const { port, url } = server;
    const sockets: TLSSocket[] = [];
    try {
      // One answer first: it is about 1 MB, so eight unread on one connection overflow the socket.
      const first = await httpsRequest(`${url}/mutate`, JSON.stringify(podReview(optedInPod())), { ca });
      assert.equal(first.status, 200);
      assert.ok(first.text.length > BIG_VALUE_BYTES, `the answer weighs ${first.text.length} bytes`);
      const baseline = await rssMiB(server.pid);

      const request = rawPost('/mutate', JSON.stringify(podReview(optedInPod())));
      for (let i = 0; i < CLIENTS; i++) {
        const socket = await openTls(port, ca);
        socket.pause(); // never reads
        socket.on('error', () => {});
        socket.write(request.repeat(PIPELINED));
        sockets.push(socket);
      }
      let peak = 0;
      for (let i = 0; i < 20; i++) {
        await sleep(100);
        peak = Math.max(peak, await rssMiB(server.pid));
      }
      t.diagnostic(`server RSS: ${baseline.toFixed(1)} MiB before, ${peak.toFixed(1)} MiB at peak`);
      assert.ok(peak < DEPLOYMENT_LIMIT_MIB, `peak RSS ${peak.toFixed(1)} MiB`);

      for (const s of sockets) s.destroy();
      // The slots come back as the connections go; a valid review is then served.
      await sleep(200);
      const { response } = await admit(url, ca, optedInPod());
      assert.equal(response.allowed, true);
    } finally {
      for (const s of sockets) s.destroy();
      await server.kill(); // a graceful stop would wait on the unread connections
    }
  });
});
