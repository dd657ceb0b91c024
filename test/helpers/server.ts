import { createLogger } from '../../src/log.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { serve, type Running } from '../../src/main.js';
import type { FakeApiServer } from './fake-apiserver.js';
import { LOOPBACK_FLAGS } from './serve-process.js';
import { eventually, HOME } from './sidecartemplates.js';
import { makeTestCerts, type TestCerts } from './tls.js';

export interface TestServer {
  readonly running: Running;
  readonly certs: TestCerts;
  /** https://127.0.0.1:PORT */
  readonly url: string;
  /** http://127.0.0.1:HEALTHPORT */
  readonly healthUrl: string;
  close(): Promise<void>;
}

/** Starts the real server (the code path `sidecar-injector serve` runs) on ephemeral loopback ports. */
export async function startTestServer(flags: readonly string[] = []): Promise<TestServer> {
  const certs = await makeTestCerts();
  const config = serveConfig([...LOOPBACK_FLAGS, '--cert-dir', certs.certDir, '--templates-dir', 'templates', ...flags], {});
  const running = await serve(config, createLogger('silent'));
  return {
    running,
    certs,
    url: `https://127.0.0.1:${running.port}`,
    healthUrl: `http://127.0.0.1:${running.healthPort}`,
    close: () => running.close(),
  };
}

/**
 * Starts the real server on the SidecarTemplate objects of the API stand-in (`--templates-source
 * cluster`, the injector's namespace HOME) and resolves once /readyz says 200: after its first list.
 */
export async function startClusterTestServer(api: FakeApiServer, flags: readonly string[] = []): Promise<TestServer> {
  const server = await startTestServer(['--templates-source', 'cluster', '--kubeconfig', api.kubeconfig, '--namespace', HOME, ...flags]);
  try {
    await eventually(async () => (await fetch(`${server.healthUrl}/readyz`)).status === 200, 'ready after the first list');
    return server;
  } catch (err) {
    await server.close();
    throw err;
  }
}
