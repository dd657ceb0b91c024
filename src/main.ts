import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { createHandlers, reviewLimits } from './admission/handlers.js';
import { logReviews } from './admission/record.js';
import type { KeyPair } from './certs/pki.js';
import { certificateValidity, makeSelfSigned, readCertDir, readClientCa, verifyClientCa, verifyServingPair } from './certs/source.js';
import { watchCertificate, watchForChange } from './certs/watcher.js';
import { imageMirrors, type Config } from './config/config.js';
import type { KubeClients } from './kube/client.js';
import { controllerOf, ownerEvents, type OwnerEvents } from './kube/events.js';
import { createLogger, type Logger } from './log.js';
import { CertificateKind, createMetrics, ReloadResult as CertificateReload, type Metrics } from './metrics/metrics.js';
import { createAdmissionApp } from './server/admission-app.js';
import { createAdmissionServer } from './server/admission-server.js';
import { secureContextOptions } from './server/edge.js';
import { createHealthServer } from './server/health.js';
import type { PolicySync } from './policy/sync.js';
import { openTemplateStore, type ReloadResult, type TemplateStore } from './templates/watch.js';

/** A running injector in any mode: its health server (probes and metrics) and how to stop it. */
export interface Injector {
  readonly health: Server;
  readonly logger: Logger;
  /** Prometheus metrics, served on the health port at /metrics. */
  readonly metrics: Metrics;
  readonly healthPort: number;
  /** --mode policy and hybrid: the sync of the admission policies. */
  readonly policies?: PolicySync;
  /** The first step of a graceful stop: readiness turns false and every answer closes its connection, but the servers still accept. */
  beginShutdown(): void;
  /** Stops accepting, finishes in-flight reviews, and resolves when both servers are closed. */
  close(): Promise<void>;
  /** Ends every open connection at once (a drain that ran out of time). */
  forceClose(): void;
}

/** A running webhook (--mode webhook or hybrid): the injector and its HTTPS review server. */
export interface Running extends Injector {
  readonly admission: HttpsServer;
  readonly port: number;
  /** When the certificate being served expires (it changes when a renewed one is swapped in). */
  certificateNotAfter(): Date;
}

/** `serve` in the mode the configuration names: the webhook (webhook, hybrid), or the policies' sync alone (policy). */
export function start(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<Injector> {
  return config.mode === 'policy' ? servePolicies(config, logger) : serve(config, logger);
}

/**
 * The composition root: loads templates and the certificate, then starts the HTTPS review server and
 * the health server. Nothing else wires modules together.
 */
export async function serve(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<Running> {
  let ready = false;
  // Read before anything is opened that a failed start would have to close.
  let clientCaPem = config.clientCa === '' ? undefined : await readClientCa(config.clientCa);
  const metrics = createMetrics();
  const policies = config.mode === 'hybrid' ? await openPolicySync(config, logger, metrics) : undefined;
  const templates = await openTemplates(config, logger, metrics, policies);
  const store = templates.store;

  const certs = await openCertificateSource(config, logger).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  const tls = certs.initial;
  metrics.setCertificateExpiry(certificateValidity(tls.certPem).notAfter);
  if (clientCaPem !== undefined) logger.info({ clientCa: config.clientCa }, 'mutual TLS: only clients with a certificate from the client CA are served');
  const limits = reviewLimits(config);
  const mirrors = imageMirrors(config);
  if (mirrors.entries.length > 0)
    logger.info(
      { imageMirrors: mirrors.entries.map((m) => `${m.source}=${m.mirror}`) },
      'image mirrors: /validate accepts sidecars running their repository from these mirrors',
    );
  const events = config.ownerEvents === 'on' ? openOwnerEvents(config, logger, metrics) : undefined;
  // During a graceful stop every answer says Connection: close (AdmissionAppDeps.draining).
  let draining = false;
  const app = createAdmissionApp({
    // At debug level, one line per decision of a review; at info, nothing is built for them.
    handlers: createHandlers({
      templates: store.current,
      limits,
      imageMirrors: mirrors,
      revision: config.revision,
      // /validate/sidecartemplates: only the injector's namespace may hold required templates.
      ...(templates.home !== undefined && { templatesHome: templates.home }),
      // Hybrid: what the policies of the last complete sync inject and check is theirs alone.
      ...(policies !== undefined && { byPolicy: policies.byPolicy, byPolicyGeneration: policies.byPolicyGeneration }),
      ...(logger.isLevelEnabled('debug') && { debug: (fields, decided) => logger.debug(fields, decided) }),
    }),
    // Every request ends in one record: its log line, its metrics, then the Event for a refused pod's owner.
    observers: [logReviews(logger), metrics.observeReview, ...(events === undefined ? [] : [events.observe])],
    ownerEvents: events !== undefined,
    maxInflight: config.maxInflight,
    bodyTimeout: config.bodyTimeout,
    transitBytes: config.bodiesInTransitMb * 1024 * 1024,
    // An answer is worth nothing after the apiserver's timeout, which --request-timeout matches.
    answerTimeout: config.requestTimeout,
    answerCacheBytes: config.answerCacheMb * 1024 * 1024,
    bodyLimits: limits.body,
    draining: () => draining,
  });
  const admission = createAdmissionServer(
    app,
    { ...tls, ...(clientCaPem !== undefined && { clientCaPem }) },
    { requestTimeout: config.requestTimeout, maxConnections: config.maxConnections },
  );
  // Readiness waits for the SidecarTemplates' first full list: before it, pods would be judged against no templates.
  // Hybrid waits for the policies' first sync to finish, complete or not, never for one to succeed: until one
  // completes the webhook injects and checks every template itself (byPolicy is false), so a sync that cannot
  // succeed is a log line and a metric, not a cluster of unready replicas (test/server/hybrid.test.ts "readiness").
  const health = createHealthServer({
    isReady: () => ready && templates.synced() && (policies?.attempted() ?? true),
    routes: new Map([['/metrics', metrics.route]]),
    requestTimeout: config.requestTimeout,
  });
  let served = tls;
  // Built like the first context from the pair and the client CA in use, so a swap of either keeps
  // the other, the protocol floor and the ciphers; open connections keep the context they were made
  // with. What is served changes only once the new context is in place, so a swap that throws
  // leaves both as they were.
  const swapContext = (pair: KeyPair, caPem: string | undefined): void =>
    admission.setSecureContext(secureContextOptions({ ...pair, ...(caPem !== undefined && { clientCaPem: caPem }) }));
  const swapCertificate = (pair: KeyPair): void => {
    const { notAfter } = certificateValidity(pair.certPem);
    swapContext(pair, clientCaPem);
    served = pair;
    metrics.setCertificateExpiry(notAfter);
    logger.info({ notAfter }, 'serving certificate swapped');
  };
  const countReload = (certificate: CertificateKind) => (swapped: boolean) =>
    metrics.recordCertificateReload(certificate, swapped ? CertificateReload.Success : CertificateReload.Failure);
  const intervalMs = config.certCheckInterval * 1000;
  const watchers = [
    certs.load &&
      watchCertificate({ initial: tls, load: certs.load, intervalMs, logger, onChange: swapCertificate, onResult: countReload(CertificateKind.Serving) }),
    // The apiserver's client CA can be rotated like the serving certificate, without a restart.
    clientCaPem !== undefined &&
      watchForChange({
        initial: clientCaPem,
        load: () => readClientCa(config.clientCa),
        same: (a, b) => a === b,
        verify: (pem) => verifyClientCa(pem),
        intervalMs,
        logger,
        what: 'client CA',
        onChange: (pem) => {
          swapContext(served, pem);
          clientCaPem = pem;
          logger.info({ clientCa: config.clientCa }, 'client CA swapped');
        },
        onResult: countReload(CertificateKind.ClientCa),
      }),
  ].filter((w) => w !== undefined && w !== false);
  const stopWatchers = (): void => watchers.forEach((w) => w.stop());

  try {
    await Promise.all([listen(admission, config.port, config.host), listen(health, config.healthPort, config.host)]);
  } catch (err) {
    // A port in use must end the process with an error, not leave the watchers' timers holding it open.
    stopWatchers();
    policies?.close();
    await Promise.all([closeServer(admission), closeServer(health), store.close()]);
    throw err;
  }
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
    ...(policies !== undefined && { policies }),
    certificateNotAfter: () => certificateValidity(served.certPem).notAfter,
    beginShutdown() {
      ready = false;
      draining = true;
    },
    forceClose() {
      admission.closeAllConnections();
      health.closeAllConnections();
    },
    async close() {
      ready = false;
      draining = true;
      stopWatchers();
      policies?.close();
      await Promise.all([closeServer(admission), closeServer(health), store.close()]);
      await events?.close();
    },
  };
}

/**
 * --mode policy: no webhook, no certificate, no review port. The templates are loaded as in
 * webhook mode and kept compiled to admission policies in the cluster; the health port serves
 * /healthz, /readyz (ready after the first complete sync) and /metrics.
 */
export async function servePolicies(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<Injector> {
  let ready = false;
  const metrics = createMetrics();
  const policies = await openPolicySync(config, logger, metrics);
  const templates = await openTemplates(config, logger, metrics, policies);
  const health = createHealthServer({
    isReady: () => ready && templates.synced() && policies.synced(),
    routes: new Map([['/metrics', metrics.route]]),
    requestTimeout: config.requestTimeout,
  });
  const stop = async (): Promise<void> => {
    ready = false;
    policies.close();
    await Promise.all([closeServer(health), templates.store.close()]);
  };
  try {
    await listen(health, config.healthPort, config.host);
  } catch (err) {
    await stop();
    throw err;
  }
  const healthPort = (health.address() as AddressInfo).port;
  ready = true;
  logger.info({ healthPort, mode: config.mode }, 'keeping the admission policies in sync with the templates; no webhook is served');
  return {
    health,
    logger,
    metrics,
    healthPort,
    policies,
    beginShutdown() {
      ready = false;
    },
    forceClose() {
      health.closeAllConnections();
    },
    close: stop,
  };
}

/**
 * --mode policy and hybrid: the sync of the admission policies, through the Kubernetes API of
 * --kubeconfig (or the ServiceAccount). The client is made now, so a missing kubeconfig stops the
 * start; the API is opened (discovery) at the first sync, which a failure retries.
 */
async function openPolicySync(config: Config, logger: Logger, metrics: Metrics): Promise<PolicySync> {
  const [{ createKubeClients }, { openPolicyApi }, { createPolicySync }] = await Promise.all([
    import('./kube/client.js'),
    import('./kube/policies.js'),
    import('./policy/sync.js'),
  ]);
  const kube = createKubeClients({ kubeconfig: config.kubeconfig, namespace: config.namespace });
  return createPolicySync({
    api: () => openPolicyApi(kube, config.policyApi),
    // The directory's set, or the SidecarTemplate objects view by view (a namespace's own templates bound to it alone), as the webhook serves them.
    policies: {
      namespace: kube.namespace,
      hybrid: config.mode === 'hybrid',
      // The policies bound the pod by the limits the webhook refuses it by (src/policy/bounds.ts).
      limits: reviewLimits(config).pod,
      ...(config.revision !== '' && { revision: config.revision }),
    },
    logger,
    onSynced: (r) => metrics.setPolicies({ compiled: r.compiled - r.kept, refused: r.refused, kept: r.kept }),
    onFailed: (reason) => metrics.countPolicySyncFailure(reason),
  });
}

/**
 * --owner-events: Events on the controller of a refused pod, through the Kubernetes API. The client
 * is made at the first Event, not at start: a server without a cluster (a laptop, --cert-dir and
 * --templates-dir) starts as before, and its Events count as failed, with one warning in the log.
 */
function openOwnerEvents(config: Config, logger: Logger, metrics: Metrics): OwnerEvents {
  let kube: Promise<KubeClients> | undefined;
  let warned = false;
  const clients = (): Promise<KubeClients> =>
    (kube ??= import('./kube/client.js').then(({ createKubeClients }) => createKubeClients({ kubeconfig: config.kubeconfig, namespace: config.namespace })));
  return ownerEvents({
    create: async (namespace, body) => (await clients()).core.createNamespacedEvent({ namespace, body }),
    // A Deployment's pods name their ReplicaSet: its own controller is where `kubectl describe deployment` looks.
    parentOf: async (namespace, name) => controllerOf((await (await clients()).apps.readNamespacedReplicaSet({ namespace, name })).metadata?.ownerReferences),
    count: metrics.countOwnerEvent,
    failed: (err) => {
      if (warned) return;
      warned = true;
      logger.warn(
        { err },
        'an Event for the owner of a refused pod could not be created (needs create on events; --owner-events=off turns them off); later failures are only counted in sidecar_injector_owner_events_total{result="failed"}',
      );
    },
    instance: hostname(),
  });
}

/** The template store, whether its first list is complete, and the namespace whose SidecarTemplates are cluster-wide when it serves them. */
interface OpenedTemplates {
  readonly store: TemplateStore;
  readonly synced: () => boolean;
  readonly home?: string;
}

/**
 * The template store of --templates-source: the directory (a mounted ConfigMap), the cluster's
 * SidecarTemplate objects, or both, the directory's templates then being cluster-wide
 * beneath the objects of the injector's namespace. `synced` is false until the objects are listed.
 */
async function openTemplates(config: Config, logger: Logger, metrics: Metrics, policies?: PolicySync): Promise<OpenedTemplates> {
  // Each set that serves is synced to the policies: the first once the source is complete, then every valid change.
  let opened: OpenedTemplates | undefined;
  const syncPolicies = (): void => {
    if (policies !== undefined && opened?.synced() === true) policies.update(opened.store.current());
  };
  const recordReload = (r: ReloadResult): void => metrics.recordReload(r.ok ? 'success' : 'failure', r.ok ? r.digest : undefined);
  const onReload = (r: ReloadResult): void => {
    recordReload(r);
    if (r.ok) syncPolicies();
  };
  let changed = (): void => undefined;
  const dir =
    config.templatesSource === 'cluster'
      ? undefined
      : await openTemplateStore(config.templatesDir, {
          logger,
          pollIntervalMs: config.templatesPollSeconds * 1000,
          historyWindowMs: config.templateHistoryMinutes * 60 * 1000,
          // With both sources the directory's change is the cluster store's to publish.
          onReload: (r) => {
            metrics.setTemplatesNotServed('directory', r.ok ? 0 : 1);
            if (config.templatesSource === 'both') changed();
            else onReload(r);
          },
        });
  if (dir !== undefined) {
    const set = dir.current();
    metrics.setTemplateSet(set.digest);
    logger.info(
      { dir: config.templatesDir, templates: [...set.templates.keys()], defaults: set.defaults.map((t) => t.name), digest: set.digest },
      'templates loaded',
    );
  }
  if (dir !== undefined && config.templatesSource === 'dir') {
    opened = { store: dir, synced: () => true };
    syncPolicies();
    return opened;
  }
  // Loaded only here, as for --cert-secret: client-node's import is costly.
  const [{ createKubeClients }, { openClusterTemplateStore }] = await Promise.all([import('./kube/client.js'), import('./kube/sidecartemplates.js')]);
  const kube = createKubeClients({ kubeconfig: config.kubeconfig, namespace: config.namespace });
  const historyWindowMs = config.templateHistoryMinutes * 60 * 1000;
  const policyCondition =
    config.mode === 'webhook'
      ? undefined
      : (await import('./policy/sync.js')).policyConditions(kube.namespace, config.revision === '' ? undefined : config.revision, config.mode === 'hybrid');
  const cluster = openClusterTemplateStore(kube, {
    logger,
    historyWindowMs,
    onReload,
    ...(policyCondition !== undefined && { policyCondition }),
    onNotServed: (count) => metrics.setTemplatesNotServed('sidecartemplates', count),
    ...(dir !== undefined && { base: dir.current }),
  });
  changed = cluster.refresh;
  logger.info(
    { namespace: kube.namespace, api: kube.server, via: kube.source, withDir: dir !== undefined },
    'watching sidecartemplates: those in the namespace are cluster-wide, the others apply to their namespace',
  );
  const store: TemplateStore = {
    current: cluster.current,
    reload: () => dir?.reload() ?? cluster.reload(),
    close: async () => {
      await Promise.all([cluster.close(), dir?.close()]);
    },
  };
  opened = { store, synced: cluster.synced, home: kube.namespace };
  syncPolicies();
  return opened;
}

/** Where the serving certificate comes from, and how to fetch it again (absent: it never changes). */
interface CertificateSource {
  readonly initial: KeyPair;
  readonly load?: () => Promise<KeyPair>;
}

/**
 * --cert-secret: a Secret kept current through the Kubernetes API, its CA published into the webhook
 * configurations; --cert-dir: files (a mounted Secret, e.g. from cert-manager) re-read when they
 * change; neither: a self-signed certificate for localhost, for a laptop.
 */
async function openCertificateSource(config: Config, logger: Logger): Promise<CertificateSource> {
  if (config.certSecret !== '') {
    // Loaded only here: @kubernetes/client-node costs ~350 ms and ~60 MB of RSS to import, which a
    // server reading its certificate from files never needs.
    const [
      { createKubeClients },
      { createSecretStore },
      { isPublished, publishCaBundle },
      { DefaultPolicy, overlapFor, reconcileCertificate, serviceDnsNames },
    ] = await Promise.all([import('./kube/client.js'), import('./kube/secret.js'), import('./kube/webhooks.js'), import('./certs/bootstrap.js')]);
    const kube = createKubeClients({ kubeconfig: config.kubeconfig, namespace: config.namespace });
    const store = createSecretStore(kube.core, kube.namespace, config.certSecret);
    const policy = { ...DefaultPolicy, dnsNames: serviceDnsNames(config.serviceName, kube.namespace), overlapMs: overlapFor(config.certCheckInterval * 1000) };
    const publish = async (pem: string): Promise<boolean> => isPublished(await publishCaBundle(kube.admission, config.webhookConfig, pem));
    const reconcile = async (): Promise<KeyPair> =>
      (await reconcileCertificate({ store, policy, logger, ...(config.webhookConfig !== '' && { publish }) })).serving;
    const initial = await reconcile();
    logger.info(
      {
        secret: `${kube.namespace}/${config.certSecret}`,
        api: kube.server,
        via: kube.source,
        dnsNames: policy.dnsNames,
        notAfter: certificateValidity(initial.certPem).notAfter,
      },
      'serving certificate from the Secret',
    );
    return { initial, load: reconcile };
  }
  if (config.certDir !== '') {
    const initial = await readCertDir(config.certDir);
    // A pair that cannot serve stops the start with the reason, rather than failing every handshake.
    verifyServingPair(initial, config.certDir);
    logger.info({ certDir: config.certDir }, 'serving certificate loaded');
    return { initial, load: () => readCertDir(config.certDir) };
  }
  const made = await makeSelfSigned(config.selfSignedDir);
  logger.warn({ caFile: made.caFile }, 'no --cert-dir given: serving a self-signed certificate for localhost and 127.0.0.1; trust the CA in caFile');
  return { initial: made };
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
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
