import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { makeSelfSigned, readCertDir, readClientCa } from './certs/source.js';
import type { Config } from './config/config.js';
import { certificateValidity } from './certs/pki.js';
import { createLogger, type Logger } from './log.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import { createAdmissionApp, createAdmissionServer } from './server/admission.js';
import { createHealthServer } from './server/health.js';
import { loadTemplateSet, type TemplateSet } from './templates/load.js';

/** A running injector: its two servers and how to stop them. */
export interface Running {
  readonly admission: HttpsServer;
  readonly health: Server;
  readonly logger: Logger;
  /** Prometheus metrics, served on the health port at /metrics. */
  readonly metrics: Metrics;
  readonly port: number;
  readonly healthPort: number;
  /** Stops accepting, finishes in-flight reviews, and resolves when both servers are closed. */
  close(): Promise<void>;
}

/**
 * The composition root: loads templates and the certificate, then starts the HTTPS review server and
 * the health server. Nothing else wires modules together.
 */
export async function serve(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<Running> {
  let ready = false;
  const metrics = createMetrics();
  const templates: TemplateSet = await loadTemplateSet(config.templatesDir);
  metrics.setTemplateSet(templates.digest);
  logger.info({ dir: config.templatesDir, templates: [...templates.templates.keys()], defaults: templates.defaults.map((t) => t.name), digest: templates.digest }, 'templates loaded');

  const tls = await loadCertificate(config, logger);
  metrics.setCertificateExpiry(certificateValidity(tls.certPem).notAfter);
  const clientCaPem = config.clientCa === '' ? undefined : await readClientCa(config.clientCa);
  if (clientCaPem !== undefined) logger.info({ clientCa: config.clientCa }, 'mutual TLS: only clients with a certificate from the client CA are served');
  const app = createAdmissionApp({ logger, templates: () => templates, onReview: metrics.observeReview, onError: metrics.observeError, maxInflight: config.maxInflight });
  const admission = createAdmissionServer(app, { ...tls, ...(clientCaPem !== undefined && { clientCaPem }) }, { requestTimeout: config.requestTimeout, maxConnections: config.maxConnections });
  const health = createHealthServer({ isReady: () => ready, routes: new Map([['/metrics', metrics.route]]) });

  await Promise.all([listen(admission, config.port, config.host), listen(health, config.healthPort, config.host)]);
  const port = (admission.address() as AddressInfo).port;
  const healthPort = (health.address() as AddressInfo).port;
  ready = true;
  logger.info({ port, healthPort }, 'serving /mutate and /validate over HTTPS');

  return {
    admission,
    health,
    logger,
    metrics,
    port,
    healthPort,
    async close() {
      ready = false;
      await Promise.all([closeServer(admission), closeServer(health)]);
    },
  };
}

async function loadCertificate(config: Config, logger: Logger): Promise<{ certPem: string; keyPem: string }> {
  if (config.certDir !== '') {
    const pair = await readCertDir(config.certDir);
    logger.info({ certDir: config.certDir }, 'serving certificate loaded');
    return pair;
  }
  const made = await makeSelfSigned(config.selfSignedDir);
  logger.warn({ caFile: made.caFile }, 'no --cert-dir given: serving a self-signed certificate for localhost and 127.0.0.1; trust the CA in caFile');
  return made;
}

function listen(server: Server | HttpsServer, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function closeServer(server: Server | HttpsServer): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
