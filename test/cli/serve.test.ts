import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { admit, validatePod } from '../helpers/apiserver.js';
import { CLI_ENTRY } from '../helpers/cli.js';
import { optedInPod } from '../helpers/review.js';
import { startServeProcess } from '../helpers/serve-process.js';

/** Runs the CLI to completion and returns its exit code and output. */
function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...CLI_ENTRY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('sidecar-injector serve', () => {
  it('serves the bundled templates with a self-signed certificate and exits 0 on SIGTERM', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'serve-'));
    const server = await startServeProcess(['--self-signed-dir', dir]);
    const { port, logs } = server;
    try {
      const caFile: string = logs.find((l) => l.caFile)?.caFile ?? '';
      assert.equal(caFile, join(dir, 'ca.crt'), `no "caFile" line in ${logs.map((l) => l.msg).join(', ')}`);
      const ca = await readFile(caFile, 'utf8');
      const { response, pod } = await admit(`https://localhost:${port}`, ca, optedInPod());
      assert.equal(response.allowed, true);
      assert.ok(pod.spec.containers.some((c: any) => c.name === 'log-shipper'));
      // Two more pods of the same ReplicaSet: the third answer comes from the answer cache.
      for (let i = 0; i < 2; i++) assert.deepEqual((await admit(`https://localhost:${port}`, ca, optedInPod())).pod, pod);

      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
      assert.deepEqual(server.notJson, [], 'every line it wrote is JSON');
      const reviews = logs.filter((l) => l.msg === 'review');
      assert.equal(reviews.length, 3, 'one log line per review');
      assert.deepEqual(
        reviews.map((l) => l.cached),
        [false, false, true],
      );
      assert.equal(new Set(reviews.map((l) => l.uid)).size, 3);
      const review = reviews[0];
      assert.equal(review.decision, 'injected');
      assert.equal(review.pod, 'web-7c9f8b6d4-');
      assert.equal(typeof review.durationMs, 'number');
      assert.equal(review.object, undefined, 'never the whole object at info level');
    } finally {
      await server.kill();
    }
  });

  it('refuses to start with an invalid template, naming the file, template and path', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bad-templates-'));
    await writeFile(
      join(dir, 'broken.yaml'),
      'apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: broken\nspec:\n  containers:\n    - name: x\n',
    );
    const { code, stderr } = await runCli(['serve', '--templates-dir', dir, '--port', '0', '--health-port', '0']);
    assert.equal(code, 1);
    assert.match(stderr, /broken\.yaml:7:\d+: template "broken": \/spec\/containers\/0: missing required field "image"/);
  });

  it('exits 1 when its port is taken, instead of hanging on its watchers', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    try {
      const port = String((taken.address() as AddressInfo).port);
      const { code, stderr } = await runCli([
        'serve',
        '--port',
        port,
        '--host',
        '127.0.0.1',
        '--health-port',
        '0',
        '--self-signed-dir',
        await mkdtemp(join(tmpdir(), 'taken-')),
      ]);
      assert.equal(code, 1);
      assert.equal(
        stderr,
        `sidecar-injector: cannot listen on 127.0.0.1:${port}: the port is already in use; stop the process that holds it or choose another with --port or --health-port\n`,
      );
    } finally {
      taken.close();
    }
  });

  it('admits over TLS a pod whose sidecar a later webhook moved to the mirror given by --image-mirror (twice)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'serve-mirror-'));
    const server = await startServeProcess([
      '--self-signed-dir',
      dir,
      '--image-mirror',
      'quay.io=mirror.example.com/quay',
      '--image-mirror',
      'docker.io=mirror.example.com/dockerhub',
    ]);
    try {
      assert.deepEqual(server.logs.find((l) => l.imageMirrors)?.imageMirrors, ['quay.io=mirror.example.com/quay', 'docker.io=mirror.example.com/dockerhub']);
      const url = `https://localhost:${server.port}`;
      const ca = await readFile(join(dir, 'ca.crt'), 'utf8');
      const { pod } = await admit(url, ca, optedInPod({ annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' } }));
      // A policy after the injector moves Docker Hub images to the mirror, then the apiserver re-invokes /mutate.
      const proxy = pod.spec.initContainers.find((c: any) => c.name === 'proxy');
      proxy.image = proxy.image.replace(/^docker\.io\//, 'mirror.example.com/dockerhub/');
      const again = await admit(url, ca, pod);
      assert.deepEqual(again.ops, []);
      const response = await validatePod(url, ca, again.pod);
      assert.equal(response.allowed, true, response.status?.message);
      assert.equal(response.auditAnnotations.reason, 'sidecars-mirrored');
      // Without the mirror a sidecar from elsewhere is still refused.
      proxy.image = 'elsewhere.example.com/envoyproxy/envoy:v1.32.3';
      const refused = await validatePod(url, ca, pod);
      assert.equal(refused.allowed, false);
      assert.match(refused.status.message, /--image-mirror docker\.io=elsewhere\.example\.com$/);
    } finally {
      await server.kill();
    }
  });

  it('refuses to start with an invalid --image-mirror, in one line naming the flag', async () => {
    const { code, stderr } = await runCli(['serve', '--image-mirror', 'docker.io=mirror', '--port', '0', '--health-port', '0']);
    assert.equal(code, 1);
    assert.match(
      stderr,
      /^sidecar-injector: invalid configuration: --image-mirror \(SIDECAR_INJECTOR_IMAGE_MIRROR\): "docker\.io=mirror": the mirror "mirror" does not begin with a registry host[^\n]*\n$/,
    );
  });

  it('refuses an invalid flag value, naming the flag', async () => {
    const { code, stderr } = await runCli(['serve', '--port', 'https']);
    assert.equal(code, 1);
    assert.match(stderr, /--port/);
  });
});
