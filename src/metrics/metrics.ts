import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type CounterConfiguration, type HistogramConfiguration } from 'prom-client';
import { endpointLabel, HandlerKind } from '../admission/endpoints.js';
import { Decisions, ERROR_DECISION, Reasons, type ReviewRecord } from '../admission/record.js';
import { Decision } from '../admission/verdict.js';
import { Reason } from '../inject/policy.js';
import { buildInfo } from '../build/info.js';

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
 * request chooses would let any client add time series, which Prometheus keeps for good (3,000
 * reviews with distinct operations once grew /metrics from 12 KB to 6 MB; issue 11).
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
  /** Records the template set now serving (at start and after each successful reload). */
  setTemplateSet(digest: string, at?: Date): void;
  /** Records when the serving certificate expires (at start and after each rotation). */
  setCertificateExpiry(notAfter: Date): void;
  /** Counts a certificate reload: a new serving pair or client CA swapped in (success), or one that could not be used (failure). */
  recordCertificateReload(certificate: CertificateKind, result: ReloadResult): void;
  /** The `/metrics` route for the health server: Prometheus text format. */
  readonly route: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

export interface MetricsOptions {
  /** Also export prom-client's process_* and nodejs_* metrics (CPU, RSS, event loop lag, GC). */
  readonly processMetrics?: boolean;
}

/** Creates a registry of its own (so several servers in one process never share counts) and the metrics in it. */
export function createMetrics(opts: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (opts.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const reviews = new Tally({
    name: `${PREFIX}reviews_total`,
    help: 'AdmissionReviews answered, by endpoint, operation, decision (injected, skipped, allowed, denied, error) and reason',
    labelNames: ['endpoint', 'operation', 'decision', 'reason'] as const,
    registers,
  });
  const latency = new HistogramCells({
    name: `${PREFIX}review_duration_seconds`,
    help: 'Time from the start of reading a review to its answer, by endpoint and decision',
    labelNames: ['endpoint', 'decision'] as const,
    buckets: [...LATENCY_BUCKETS],
    registers,
  });
  const cacheLookups = new Tally({
    name: `${PREFIX}answer_cache_lookups_total`,
    help: 'Reviews by endpoint and answer cache result (hit: the answer to an earlier review that differed only in its uid; miss: computed)',
    labelNames: ['endpoint', 'result'] as const,
    registers,
  });
  const injections = new Tally({
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
      const ep = endpointLabel(record.endpoint);
      if (record.decision === ERROR_DECISION) {
        reviews.add(ep, '', ERROR_DECISION, closed(Reasons, record.reason));
        return;
      }
      cacheLookups.add(ep, record.cached ? 'hit' : 'miss');
      const decision = closed(Decisions, record.decision);
      reviews.add(ep, closed(OPERATIONS, record.operation), decision, closed(Reasons, record.reason));
      latency.add(record.durationMs / 1000, ep, decision);
      if (record.decision === Decision.Injected && record.patchOps > 0) {
        // Template names are the set's own (a closed set while it serves).
        for (const template of record.templates) injections.add(template);
      }
      if (ep === HandlerKind.Validate && record.decision === Decision.Denied && record.reason === Reason.SidecarsMissing) {
        rejections.inc({ namespace: namespaceLabel(record.namespace) });
      }
    },
    recordReload(result, digest) {
      reloads.inc({ result });
      if (result === ReloadResult.Success && digest !== undefined) setTemplateSet(digest);
    },
    setTemplateSet,
    setCertificateExpiry(notAfter) {
      certExpiry.set(notAfter.getTime() / 1000);
    },
    recordCertificateReload(certificate, result) {
      certReloads.inc({ certificate, result });
    },
    route: async (_req, res) => {
      const text = await registry.metrics();
      res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
  };
}

/**
 * A Counter whose counts the review path keeps in plain cells, one per label values, and hands to
 * prom-client when the counter is read (its collect runs on every scrape). `counter.inc(labels)`
 * validates and hashes the labels on every call, about 1 µs each, three or four times a review;
 * here a review costs a Map lookup per label. The label values come from closed sets, so the cells
 * are bounded as the series are.
 */
class Tally<L extends string> {
  readonly #cells: Cells<L, { readonly labels: Partial<Record<L, string>>; count: number }>;

  constructor(config: CounterConfiguration<L> & { readonly labelNames: readonly L[] }) {
    const cells = (this.#cells = new Cells(config.labelNames, (labels) => ({ labels, count: 0 })));
    new Counter<L>({
      ...config,
      collect(this: Counter<L>) {
        for (const cell of cells.all) {
          if (cell.count === 0) continue;
          this.inc(cell.labels, cell.count);
          cell.count = 0;
        }
      },
    });
  }

  /** Counts one for the label values, given in the order of labelNames. */
  add(...values: string[]): void {
    this.#cells.of(values).count++;
  }
}

/**
 * A Histogram whose observations the review path keeps in plain cells (a count per bucket, the sum
 * and the count, per label values): prom-client's `observe(labels, value)` validates and hashes
 * the labels on every call (about 1.3 µs in a hot loop, several times that in the server). The
 * cells are read where prom-client reads its own, in `getForPromString` (which `get` reads too),
 * and written in the form prom-client's Histogram writes: the scrape's text is the same (the
 * metrics tests read it).
 */
class HistogramCells<L extends string> extends Histogram<L> {
  readonly #bounds: readonly number[];
  readonly #cells: Cells<L, HistogramCell<L>>;
  readonly #name: string;
  readonly #help: string;

  constructor(config: HistogramConfiguration<L> & { readonly labelNames: readonly L[]; readonly buckets: readonly number[] }) {
    super(config);
    this.#name = config.name;
    this.#help = config.help;
    const bounds = (this.#bounds = [...config.buckets]);
    this.#cells = new Cells(config.labelNames, (labels) => ({ labels, buckets: new Float64Array(bounds.length), sum: 0, count: 0 }));
  }

  /** Observes `value` for the label values, given in the order of labelNames. */
  add(value: number, ...values: string[]): void {
    const cell = this.#cells.of(values);
    const bounds = this.#bounds;
    // The first bucket whose upper bound holds the value; past the last, only +Inf (the count) does.
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        cell.buckets[i]!++;
        break;
      }
    }
    cell.sum += value;
    cell.count++;
  }

  /** What prom-client's registry reads to write the scrape (prom-client's Histogram has this method; its types do not list it). */
  async getForPromString(): Promise<{ name: string; help: string; type: 'histogram'; values: Series[]; aggregator: 'sum' }> {
    const name = this.#name;
    const values: Series[] = [];
    for (const cell of this.#cells.all) {
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += cell.buckets[i]!;
        values.push({ labels: { le: this.#bounds[i]! }, sharedLabels: cell.labels, value: cumulative, metricName: `${name}_bucket`, exemplar: null });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: cell.labels, value: cell.count, metricName: `${name}_bucket`, exemplar: null });
      values.push({ labels: {}, sharedLabels: cell.labels, value: cell.sum, metricName: `${name}_sum`, exemplar: undefined });
      values.push({ labels: {}, sharedLabels: cell.labels, value: cell.count, metricName: `${name}_count`, exemplar: undefined });
    }
    return { name, help: this.#help, type: 'histogram', values, aggregator: 'sum' };
  }

  override reset(): void {
    // prom-client's constructor calls reset before this class has its fields.
    if (#cells in this) this.#cells.clear();
  }
}

/** One series as prom-client's Histogram hands it to the registry: its own labels, and the cell's as shared labels. */
interface Series {
  readonly labels: Readonly<Record<string, string | number>>;
  readonly sharedLabels: Readonly<Partial<Record<string, string>>>;
  readonly value: number;
  readonly metricName: string;
  /** null for a bucket, undefined for the sum and the count, as prom-client has it. */
  readonly exemplar: null | undefined;
}

interface HistogramCell<L extends string> {
  readonly labels: Partial<Record<L, string>>;
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * Cells by label values, found by one Map lookup per label: the values are strings the review
 * already holds (hashed once by V8), where a key joined from them would be a new string to build
 * and hash on every review.
 */
class Cells<L extends string, C> {
  readonly #labelNames: readonly L[];
  readonly #make: (labels: Partial<Record<L, string>>) => C;
  #root = new Map<string, unknown>();
  /** Every cell, in the order they were made (the order prom-client lists series in). */
  readonly all: C[] = [];

  constructor(labelNames: readonly L[], make: (labels: Partial<Record<L, string>>) => C) {
    this.#labelNames = labelNames;
    this.#make = make;
  }

  /** The cell of the label values, given in the order of labelNames; made on first use. */
  of(values: readonly string[]): C {
    let map = this.#root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = map.get(values[i]!) as Map<string, unknown> | undefined;
      if (next === undefined) map.set(values[i]!, (next = new Map()));
      map = next;
    }
    const cell = map.get(values[last]!) as C | undefined;
    if (cell !== undefined) return cell;
    const made = this.#make(Object.fromEntries(this.#labelNames.map((name, i) => [name, values[i]!])) as Partial<Record<L, string>>);
    map.set(values[last]!, made);
    this.all.push(made);
    return made;
  }

  clear(): void {
    this.#root = new Map();
    this.all.length = 0;
  }
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
