import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AdmissionApp } from './admission-app.js';
import { limitConnections } from './connections.js';
import { EdgeLimits, secureContextOptions, type AdmissionTls } from './edge.js';

export interface AdmissionServerOptions {
  /** Seconds a client may take to send a whole request (`--request-timeout`). */
  readonly requestTimeout?: number;
  /** Open connections (`--max-connections`); one more closes the oldest idle one (connections.ts). */
  readonly maxConnections?: number;
}

/** The HTTPS server for the review listener, with the limits of EdgeLimits and `opts`. */
export function createAdmissionServer(app: AdmissionApp, tls: AdmissionTls, opts: AdmissionServerOptions = {}): HttpsServer {
  const requestSeconds = opts.requestTimeout ?? 10;
  const mutualTls = tls.clientCaPem !== undefined;
  const server = createHttpsServer(
    {
      ...secureContextOptions(tls),
      // With a client CA only clients holding a certificate from it complete the handshake.
      requestCert: mutualTls,
      rejectUnauthorized: mutualTls,
      handshakeTimeout: Math.min(EdgeLimits.handshakeSeconds, requestSeconds) * 1000,
      requestTimeout: requestSeconds * 1000,
      headersTimeout: Math.min(EdgeLimits.headersSeconds, requestSeconds) * 1000,
      keepAliveTimeout: EdgeLimits.keepAliveSeconds * 1000,
      connectionsCheckingInterval: EdgeLimits.checkIntervalMs,
      maxHeaderSize: EdgeLimits.maxHeaderSize,
      insecureHTTPParser: false,
      requireHostHeader: true,
    },
    app,
  );
  server.maxRequestsPerSocket = EdgeLimits.maxRequestsPerSocket;
  server.maxHeadersCount = EdgeLimits.maxHeadersCount;
  limitConnections(server, opts.maxConnections ?? 1024);
  server.setTimeout(EdgeLimits.idleSocketSeconds * 1000);
  return server;
}
