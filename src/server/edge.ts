import type { SecureContextOptions } from 'node:tls';

/**
 * The HTTP edge, chosen for one client, the kube-apiserver: it sends small headers, a body of at
 * most ~3 MiB at once, gives up after timeoutSeconds (10 s by default), and keeps idle connections
 * for 90 s (Go's IdleConnTimeout).
 */
export const EdgeLimits = {
  /** The TLS handshake and the request headers; the apiserver sends both in milliseconds. */
  handshakeSeconds: 5,
  headersSeconds: 5,
  /** Longer than the apiserver's 90 s idle timeout, so the client, not the server, closes an idle
   * connection: client-go does not retry a POST on a connection the server closed. */
  keepAliveSeconds: 120,
  /** Bounded so that long-lived apiserver connections rebalance across replicas after a scale-out. */
  maxRequestsPerSocket: 1000,
  /** The apiserver sends a few hundred bytes of headers (a bearer token fits well). */
  maxHeaderSize: 8 * 1024,
  maxHeadersCount: 64,
  /** A socket with no traffic for this long while a request is open (a reader that never reads). */
  idleSocketSeconds: 30,
  /** How often Node checks the header and request timeouts (its default, 30 s, makes them late). */
  checkIntervalMs: 1000,
} as const;

/** The serving certificate and, for mutual TLS, the CA that client certificates must chain to. */
export interface AdmissionTls {
  readonly certPem: string;
  readonly keyPem: string;
  readonly clientCaPem?: string;
}

/** TLS settings: TLS 1.2 at least, forward-secret AEAD suites only (Mozilla "intermediate"). */
const TLS_OPTIONS: SecureContextOptions = {
  minVersion: 'TLSv1.2',
  ciphers: [
    'TLS_AES_128_GCM_SHA256',
    'TLS_AES_256_GCM_SHA384',
    'TLS_CHACHA20_POLY1305_SHA256',
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
    'ECDHE-RSA-CHACHA20-POLY1305',
  ].join(':'),
  honorCipherOrder: true,
};

/**
 * Everything that goes into the TLS context, in one place: the certificate swap (rotation) builds
 * the new context with this too, `server.setSecureContext(secureContextOptions(tls))`, so a
 * rotated certificate keeps the protocol floor, the ciphers and the client CA.
 */
export function secureContextOptions(tls: AdmissionTls): SecureContextOptions {
  return { ...TLS_OPTIONS, cert: tls.certPem, key: tls.keyPem, ...(tls.clientCaPem !== undefined && { ca: tls.clientCaPem }) };
}
