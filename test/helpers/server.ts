import { createLogger } from '../../src/log.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { serve, type Running } from '../../src/main.js';
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
  const config = serveConfig(
    ['--port', '0', '--health-port', '0', '--host', '127.0.0.1', '--cert-dir', certs.certDir, '--templates-dir', 'templates', ...flags],
    {},
  );
  const running = await serve(config, createLogger('silent'));
  return {
    running,
    certs,
    url: `https://127.0.0.1:${running.port}`,
    healthUrl: `http://127.0.0.1:${running.healthPort}`,
    close: () => running.close(),
  };
}
