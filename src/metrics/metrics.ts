import type { IncomingMessage, ServerResponse } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { endpointLabel, HandlerKind } from '../admission/endpoints.js';
import { Decisions, ERROR_DECISION, Reasons, type ReviewRecord } from '../admission/record.js';
import { Decision } from '../admission/verdict.js';
import { Reason } from '../inject/policy.js';
import { buildInfo } from '../build/info.js';
import { OwnerEventResult } from '../kube/events.js';

/** Every metric name starts with this, so one `{__name__=~"sidecar_injector_.*"}` finds them all. */
export const PREFIX = 'sidecar_injector_';

/** The decision label of a review that ended in an HTTP error instead of an AdmissionResponse. */
export { ERROR_DECISION };

/**
 * Latency buckets in seconds. A review costs well under a millisecond here, and the apiserver's
 * own histogram starts at 5 ms (apiserver_admission_webhook_admission_duration_seconds), so the low
 * end is finer than its and the top reaches its default 10 s timeout.
 */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10] as const;

/**
 * Label values come only from closed sets, and anything else is `other`: a label value that a
 * request chooses would let any client add time series, which Prometheus keeps for good
 * (test/metrics/metrics.test.ts: 3,000 distinct operations leave /metrics the size it was).
 */
export const OTHER = 'other';

/** The AdmissionRequest operations (admission/v1 Operation). */
const OPERATIONS: ReadonlySet<string> = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);
/** Namespaces that get their own value of the rejections' namespace label; later ones count as `other`. */
export const MAX_NAMESPACE_LABELS = 100;
/** A namespace name (RFC 1123 label, as Kubernetes requires). */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Result of one attempt to (re)load the template set. */
export const ReloadResult = { Success: 'success', Failure: 'failure' } as const;
export type ReloadResult = (typeof ReloadResult)[keyof typeof ReloadResult];

/** Where templates come from: the directory (a mounted ConfigMap), and the cluster's SidecarTemplate objects. */
export const TemplateSource = { Directory: 'directory', SidecarTemplates: 'sidecartemplates' } as const;
export type TemplateSource = (typeof TemplateSource)[keyof typeof TemplateSource];

/**
 * Templates by what the policies do with them (--mode policy and hybrid): compiled (a policy injects
 * and checks it), refused (it does not compile: the webhook's in hybrid, refused by the validating
 * policy in policy mode), kept (policy mode: it stopped compiling, its last compiled version serves).
 */
export const PolicyState = { Compiled: 'compiled', Refused: 'refused', Kept: 'kept' } as const;
export type PolicyState = (typeof PolicyState)[keyof typeof PolicyState];
/** Why a sync of the policies failed (src/policy/sync.ts SyncFailure). */
const SYNC_FAILURES: ReadonlySet<string> = new Set(['forbidden', 'not-served', 'api', 'compile', 'refused']);

/** Which certificate a reload was for. */
export const CertificateKind = { Serving: 'serving', ClientCa: 'client-ca' } as const;
export type CertificateKind = (typeof CertificateKind)[keyof typeof CertificateKind];

/** The injector's Prometheus metrics and the functions that feed them. */
export interface Metrics {
  readonly registry: Registry;
  /**
   * The review observer of the admission app: counts every request to a review path by its
   * record; an answered review is also timed and counted as an answer cache hit or miss, a request
   * answered with an HTTP error (bad body, internal fault) is counted under its error code.
   */
  observeReview(record: ReviewRecord): void;
  /** Counts a template reload; on success also records the set now in use. */
  recordReload(result: ReloadResult, digest?: string): void;
  /**
   * Records how many templates of a source are not served as they are now: the directory (1 while
   * its files fail to load and the last good set serves), or the SidecarTemplate objects whose
   * current version is invalid or refused. A state, not an event: an alert on it stays firing for
   * as long as they are broken (test/metrics/metrics.test.ts).
   */
  setTemplatesNotServed(source: TemplateSource, count: number): void;
  /** Records the template set now serving (at start and after each successful reload). */
  setTemplateSet(digest: string, at?: Date): void;
  /** Records when the serving certificate expires (at start and after each rotation). */
  setCertificateExpiry(notAfter: Date): void;
  /** Counts a certificate reload: a new serving pair or client CA swapped in (success), or one that could not be used (failure). */
  recordCertificateReload(certificate: CertificateKind, result: ReloadResult): void;
  /** Counts an Event considered for a refused pod's owner (--owner-events) by what became of it. */
  countOwnerEvent(result: OwnerEventResult): void;
  /** After each complete sync of the policies (--mode policy and hybrid): templates by state. */
  setPolicies(counts: Readonly<Record<PolicyState, number>>): void;
  /** Counts a sync of the policies that failed, by reason (a closed set: forbidden, not-served, api, compile). */
  countPolicySyncFailure(reason: string): void;
  /** The `/metrics` route for the health server: Prometheus text format. */
  readonly route: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

export interface MetricsOptions {
  /** Also export prom-client's process_* and nodejs_* metrics (CPU, RSS, event loop lag, GC). */
  readonly processMetrics?: boolean;
  /** The clock of the event loop lag's window (tests move it). */
  readonly now?: () => number;
}

/** Creates a registry of its own (so several servers in one process never share counts) and the metrics in it. */
export function createMetrics(opts: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (opts.processMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    // prom-client's lag max is the longest since the previous scrape by anyone: ours keeps a window.
    registry.removeSingleMetric(LAG_MAX);
    eventLoopLagMax(registry, opts.now ?? Date.now);
  }
  const registers = [registry];

  const reviews = new Counter({
    name: `${PREFIX}reviews_total`,
    help: 'AdmissionReviews answered, by endpoint, operation, decision (injected, skipped, allowed, denied, error) and reason',
    labelNames: ['endpoint', 'operation', 'decision', 'reason'] as const,
    registers,
  });
  const latency = new Histogram({
    name: `${PREFIX}review_duration_seconds`,
    help: 'Time from the start of reading a review to its answer, by endpoint and decision',
    labelNames: ['endpoint', 'decision'] as const,
    buckets: [...LATENCY_BUCKETS],
    registers,
  });
  const cacheLookups = new Counter({
    name: `${PREFIX}answer_cache_lookups_total`,
    help: 'Reviews by endpoint and answer cache result (hit: the answer to an earlier review that differed only in its uid; miss: computed)',
    labelNames: ['endpoint', 'result'] as const,
    registers,
  });
  const injections = new Counter({
    name: `${PREFIX}injections_total`,
    help: 'Templates injected into pods (one per template per pod that received a patch)',
    labelNames: ['template'] as const,
    registers,
  });
  const rejections = new Counter({
    name: `${PREFIX}validation_rejections_total`,
    help: 'Opted-in pods the validating handler rejected because their sidecars were missing, by namespace',
    labelNames: ['namespace'] as const,
    registers,
  });
  const templateSet = new Gauge({
    name: `${PREFIX}template_set_info`,
    help: 'The template set in use (always 1; the digest label names it)',
    labelNames: ['digest'] as const,
    registers,
  });
  const reloads = new Counter({
    name: `${PREFIX}template_reloads_total`,
    help: 'Template set reloads, by result (success, failure)',
    labelNames: ['result'] as const,
    registers,
  });
  const lastReload = new Gauge({
    name: `${PREFIX}template_last_success_timestamp_seconds`,
    help: 'Unix time at which the template set in use was loaded',
    registers,
  });
  const notServed = new Gauge({
    name: `${PREFIX}templates_not_served`,
    help: 'Templates not served as they are now, by source: directory (1 while its files fail to load; the last good set serves), sidecartemplates (objects whose current version is invalid or refused)',
    labelNames: ['source'] as const,
    registers,
  });
  for (const source of Object.values(TemplateSource)) notServed.set({ source }, 0);
  const certExpiry = new Gauge({
    name: `${PREFIX}certificate_expiry_timestamp_seconds`,
    help: 'Unix time at which the serving certificate expires (notAfter)',
    registers,
  });
  const certReloads = new Counter({
    name: `${PREFIX}certificate_reloads_total`,
    help: 'Certificate reloads, by certificate (serving, client-ca) and result (success: a new one serves; failure: it could not be read or used, the current one keeps serving)',
    labelNames: ['certificate', 'result'] as const,
    registers,
  });
  const ownerEvents = new Counter({
    name: `${PREFIX}owner_events_total`,
    help: "Events for a refused pod's owner, by result (sent; failed: the API refused or was not reached; limited: one per owner and reason per minute, 5 a second in all; dropped: the queue was full)",
    labelNames: ['result'] as const,
    registers,
  });
  for (const result of Object.values(OwnerEventResult)) ownerEvents.inc({ result }, 0);
  const policies = new Gauge({
    name: `${PREFIX}policies`,
    help: 'Templates by what the admission policies do with them after the last complete sync (--mode policy and hybrid): compiled, refused (does not compile), kept (policy mode: its last compiled version serves)',
    labelNames: ['state'] as const,
    registers,
  });
  const syncFailures = new Counter({
    name: `${PREFIX}policy_sync_failures_total`,
    help: 'Syncs of the admission policies that failed and will be retried, by reason (forbidden: RBAC; not-served: the cluster lacks the API; api: another API error; compile; refused: one object the apiserver refused, the others applied, not retried until the templates change)',
    labelNames: ['reason'] as const,
    registers,
  });
  for (const reason of SYNC_FAILURES) syncFailures.inc({ reason }, 0);
  // The Prometheus *_build_info convention: always 1, the labels say what runs (join it onto other series).
  const build = new Gauge({
    name: `${PREFIX}build_info`,
    help: 'The running build (always 1; the version and node labels name it)',
    labelNames: ['version', 'node'] as const,
    registers,
  });
  build.set({ version: buildInfo().version, node: buildInfo().node }, 1);
  // Both results are exported from the start, so an alert on increase() sees the first failure.
  for (const r of Object.values(ReloadResult)) reloads.inc({ result: r }, 0);
  for (const r of Object.values(ReloadResult)) for (const c of Object.values(CertificateKind)) certReloads.inc({ certificate: c, result: r }, 0);
  const namespaceLabel = boundedLabel(MAX_NAMESPACE_LABELS, (ns) => NAMESPACE.test(ns));

  const setTemplateSet = (digest: string, at: Date = new Date()): void => {
    templateSet.reset();
    templateSet.set({ digest }, 1);
    lastReload.set(at.getTime() / 1000);
  };

  return {
    registry,
    observeReview(record) {
      const endpoint = endpointLabel(record.endpoint);
      const reason = closed(Reasons, record.reason);
      if (record.decision === ERROR_DECISION) {
        reviews.inc({ endpoint, operation: '', decision: ERROR_DECISION, reason });
        return;
      }
      cacheLookups.inc({ endpoint, result: record.cached ? 'hit' : 'miss' });
      const decision = closed(Decisions, record.decision);
      reviews.inc({ endpoint, operation: closed(OPERATIONS, record.operation), decision, reason });
      latency.observe({ endpoint, decision }, record.durationMs / 1000);
      if (record.decision === Decision.Injected && record.patchOps > 0) {
        // Template names are the set's own (a closed set while it serves).
        for (const template of record.templates) injections.inc({ template });
      }
      if (endpoint === HandlerKind.Validate && record.decision === Decision.Denied && record.reason === Reason.SidecarsMissing) {
        rejections.inc({ namespace: namespaceLabel(record.namespace) });
      }
    },
    recordReload(result, digest) {
      reloads.inc({ result });
      if (result === ReloadResult.Success && digest !== undefined) setTemplateSet(digest);
    },
    setTemplateSet,
    setTemplatesNotServed(source, count) {
      notServed.set({ source }, count);
    },
    setCertificateExpiry(notAfter) {
      certExpiry.set(notAfter.getTime() / 1000);
    },
    recordCertificateReload(certificate, result) {
      certReloads.inc({ certificate, result });
    },
    countOwnerEvent(result) {
      ownerEvents.inc({ result });
    },
    setPolicies(counts) {
      for (const state of Object.values(PolicyState)) policies.set({ state }, counts[state]);
    },
    countPolicySyncFailure(reason) {
      syncFailures.inc({ reason: closed(SYNC_FAILURES, reason) });
    },
    route: async (_req, res) => {
      const text = await registry.metrics();
      res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
  };
}

/** `value` when it belongs to the closed set, else `other`. */
function closed(set: ReadonlySet<string>, value: string): string {
  return set.has(value) ? value : OTHER;
}

/**
 * A label for values that are not a closed set but are few in a real cluster (namespaces): the
 * first `max` well-formed values keep their own label value, any later or malformed one is
 * `other`, so the series stay bounded whatever clients send.
 */
function boundedLabel(max: number, wellFormed: (value: string) => boolean): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= max || !wellFormed(value)) return OTHER;
    seen.add(value);
    return value;
  };
}

/** prom-client's name for the longest event loop delay, kept (dashboards and alerts read it). */
const LAG_MAX = 'nodejs_eventloop_lag_max_seconds';

/** How long the lag max keeps a delay: slots of LAG_SLOT_MS, the current one and LAG_SLOTS - 1 before it. */
export const LAG_SLOT_MS = 10_000;
export const LAG_SLOTS = 7;

/**
 * nodejs_eventloop_lag_max_seconds as the longest event loop delay of the last 60 to 70 s.
 * prom-client's gauge reports the longest since the previous scrape and resets it, so a client
 * that scraped /metrics in between would hide a stall from Prometheus. Here each scrape moves what perf_hooks measured since the previous one into the
 * current 10 s slot, and reads the largest of the last seven slots: a stall shows in every scrape
 * for at least 60 s after it, whoever else scrapes.
 */
function eventLoopLagMax(registry: Registry, now: () => number): void {
  // prom-client's own resolution (10 ms): a delay of D ms reads as D to D + 10.
  const delays = monitorEventLoopDelay({ resolution: 10 });
  delays.enable();
  const slots = Array.from({ length: LAG_SLOTS }, () => ({ index: -1, maxNs: 0 }));
  new Gauge({
    name: LAG_MAX,
    help: `The longest event loop delay in seconds over the last ${((LAG_SLOTS - 1) * LAG_SLOT_MS) / 1000} to ${(LAG_SLOTS * LAG_SLOT_MS) / 1000} s (a scrape does not reset it)`,
    registers: [registry],
    collect() {
      const index = Math.floor(now() / LAG_SLOT_MS);
      const slot = slots[index % LAG_SLOTS]!;
      if (slot.index !== index) Object.assign(slot, { index, maxNs: 0 });
      slot.maxNs = Math.max(slot.maxNs, delays.max);
      delays.reset();
      const recent = slots.filter((s) => s.index > index - LAG_SLOTS);
      this.set(Math.max(...recent.map((s) => s.maxNs)) / 1e9);
    },
  });
}
