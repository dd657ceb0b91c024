import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import fjp from 'fast-json-patch';
import 'reflect-metadata'; // @peculiar/x509 needs it before it loads
import { X509Certificate } from '@peculiar/x509';
import { certificateValidity as validityFromFiles } from '../../src/certs/source.js';
import { errorRecord } from '../../src/admission/record.js';
import { InjectorError } from '../../src/errors.js';
import { Counter, Histogram, Registry } from 'prom-client';
import { CertificateKind, createMetrics, LAG_SLOT_MS, LAG_SLOTS, LATENCY_BUCKETS, MAX_NAMESPACE_LABELS, ReloadResult } from '../../src/metrics/metrics.js';
import { Agent } from 'node:https';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** One sample of the Prometheus text format: `name{a="x",b="y"} value`. */
interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

function parseSamples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the one sample with this name and (at least) these labels; undefined when absent. */
function valueOf(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.ok(found.length <= 1, `${name} ${JSON.stringify(labels)} matches ${found.length} samples`);
  return found[0]?.value;
}

function getText(url: string): Promise<{ status: number; type: string; text: string }> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), text }));
    })
      .on('error', reject)
      .end();
  });
}

describe('GET /metrics', () => {
  let server: TestServer;
  let samples: Sample[];
  let contentType: string;

  const post = async (path: string, body: unknown): Promise<any> => {
    const res = await httpsRequest(`${server.url}${path}`, typeof body === 'string' ? body : JSON.stringify(body), { ca: server.certs.ca.certPem });
    return res;
  };

  before(async () => {
    server = await startTestServer();
    // Two injections, one of them a pod that names two templates.
    const injected = await post('/mutate', podReview(optedInPod(), { namespace: 'shop' }));
    await post('/mutate', podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' } }), { namespace: 'shop' }));
    // Skips (one pod three times: the answer computed the second time answers the third) and a denial.
    for (let i = 0; i < 3; i++) await post('/mutate', podReview({ metadata: { name: 'plain' }, spec: { containers: [{ name: 'a', image: 'a' }] } }));
    await post('/mutate', podReview(optedInPod(), { operation: 'UPDATE' }));
    await post('/mutate', podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'nope' } })));
    // A body that is not JSON, and a path that is not served.
    await post('/mutate', '{not json');
    await post('/nowhere', podReview(optedInPod()));
    // The validating handler: twice without the sidecars (in two namespaces), once with them.
    await post('/validate', podReview(optedInPod(), { namespace: 'shop' }));
    await post('/validate', podReview(optedInPod(), { namespace: 'billing' }));
    const pod = fjp.applyPatch(optedInPod(), decodePatch(injected.json().response), false, false).newDocument;
    await post('/validate', podReview(pod, { namespace: 'shop' }));

    const res = await getText(`${server.healthUrl}/metrics`);
    assert.equal(res.status, 200);
    contentType = res.type;
    samples = parseSamples(res.text);
  });
  after(() => server.close());

  it('answers in the Prometheus text format', () => {
    assert.match(contentType, /^text\/plain; version=0\.0\.4/);
  });

  it('counts reviews by endpoint, operation, decision and reason', () => {
    const reviews = (labels: Record<string, string>) => valueOf(samples, 'sidecar_injector_reviews_total', labels);
    assert.equal(reviews({ endpoint: 'mutate', operation: 'CREATE', decision: 'injected', reason: 'injected' }), 2);
    assert.equal(reviews({ endpoint: 'mutate', operation: 'CREATE', decision: 'skipped', reason: 'not-opted-in' }), 3);
    assert.equal(reviews({ endpoint: 'mutate', operation: 'UPDATE', decision: 'skipped', reason: 'not-pod-create' }), 1);
    assert.equal(reviews({ endpoint: 'mutate', operation: 'CREATE', decision: 'denied', reason: 'unknown-template' }), 1);
    assert.equal(reviews({ endpoint: 'mutate', decision: 'error', reason: 'BODY_MALFORMED' }), 1);
    assert.equal(reviews({ endpoint: 'other', decision: 'error', reason: 'NOT_FOUND' }), 1);
    assert.equal(reviews({ endpoint: 'validate', operation: 'CREATE', decision: 'denied', reason: 'sidecars-missing' }), 2);
    assert.equal(reviews({ endpoint: 'validate', operation: 'CREATE', decision: 'allowed', reason: 'sidecars-present' }), 1);
  });

  it('times every answered review in a millisecond-scale histogram', () => {
    const count = (endpoint: string) => valueOf(samples, 'sidecar_injector_review_duration_seconds_count', { endpoint, decision: 'injected' });
    assert.equal(count('mutate'), 2);
    const total = samples.filter((s) => s.name === 'sidecar_injector_review_duration_seconds_count').reduce((n, s) => n + s.value, 0);
    assert.equal(total, 10, 'one observation per answered review (errors have no answer to time)');
    const buckets = samples.filter(
      (s) => s.name === 'sidecar_injector_review_duration_seconds_bucket' && s.labels['endpoint'] === 'mutate' && s.labels['decision'] === 'injected',
    );
    assert.ok(
      buckets.some((b) => b.labels['le'] === '0.001'),
      'has a 1 ms bucket',
    );
    assert.equal(valueOf(samples, 'sidecar_injector_review_duration_seconds_bucket', { endpoint: 'mutate', decision: 'injected', le: '+Inf' }), 2);
  });

  it('counts answer cache hits and misses by endpoint', () => {
    const lookups = (endpoint: string, result: string) => valueOf(samples, 'sidecar_injector_answer_cache_lookups_total', { endpoint, result });
    assert.equal(lookups('mutate', 'hit'), 1, 'the repeated pod');
    assert.equal(lookups('mutate', 'miss'), 6);
    assert.equal(lookups('validate', 'miss'), 3);
    assert.equal(lookups('validate', 'hit'), undefined);
  });

  it('counts injections by template', () => {
    assert.equal(valueOf(samples, 'sidecar_injector_injections_total', { template: 'log-shipper' }), 2);
    assert.equal(valueOf(samples, 'sidecar_injector_injections_total', { template: 'proxy' }), 1);
  });

  it('counts validating rejections of opted-in pods without their sidecars, by namespace', () => {
    assert.equal(valueOf(samples, 'sidecar_injector_validation_rejections_total', { namespace: 'shop' }), 1);
    assert.equal(valueOf(samples, 'sidecar_injector_validation_rejections_total', { namespace: 'billing' }), 1);
  });

  it('names the template set in use by its digest', () => {
    const info = samples.filter((s) => s.name === 'sidecar_injector_template_set_info');
    assert.equal(info.length, 1);
    assert.match(info[0]!.labels['digest'] ?? '', /^[0-9a-f]{8,}$/);
    assert.equal(info[0]!.value, 1);
    const loaded = valueOf(samples, 'sidecar_injector_template_last_success_timestamp_seconds')!;
    assert.ok(Math.abs(loaded - Date.now() / 1000) < 120, `last success ${loaded} is recent`);
  });

  it('exports the serving certificate expiry', () => {
    // The server reads the certificate with node:crypto; @peculiar/x509 is an independent reader.
    const independent = new X509Certificate(server.certs.serving.certPem);
    const expected = independent.notAfter.getTime() / 1000;
    assert.equal(validityFromFiles(server.certs.serving.certPem).notAfter.getTime() / 1000, expected);
    assert.equal(validityFromFiles(server.certs.serving.certPem).notBefore.getTime(), independent.notBefore.getTime());
    assert.equal(valueOf(samples, 'sidecar_injector_certificate_expiry_timestamp_seconds'), expected);
  });

  it('exports both reload results from the start, at zero', () => {
    assert.equal(valueOf(samples, 'sidecar_injector_template_reloads_total', { result: 'success' }), 0);
    assert.equal(valueOf(samples, 'sidecar_injector_template_reloads_total', { result: 'failure' }), 0);
  });

  it('includes the process metrics', () => {
    assert.ok((valueOf(samples, 'process_resident_memory_bytes') ?? 0) > 0);
  });
});

describe('createMetrics', () => {
  const scrape = async (m: ReturnType<typeof createMetrics>) => parseSamples(await m.registry.metrics());

  it('counts reloads by result and switches the template set only on success', async () => {
    const m = createMetrics({ processMetrics: false });
    m.setTemplateSet('aaaa', new Date(1_000_000));
    m.recordReload(ReloadResult.Failure);
    m.recordReload(ReloadResult.Failure);
    let s = await scrape(m);
    assert.equal(valueOf(s, 'sidecar_injector_template_reloads_total', { result: 'failure' }), 2);
    assert.equal(valueOf(s, 'sidecar_injector_template_set_info', { digest: 'aaaa' }), 1);
    assert.equal(valueOf(s, 'sidecar_injector_template_last_success_timestamp_seconds'), 1000);

    m.recordReload(ReloadResult.Success, 'bbbb');
    s = await scrape(m);
    assert.equal(valueOf(s, 'sidecar_injector_template_reloads_total', { result: 'success' }), 1);
    assert.equal(valueOf(s, 'sidecar_injector_template_set_info', { digest: 'aaaa' }), undefined, 'the old set is gone');
    assert.equal(valueOf(s, 'sidecar_injector_template_set_info', { digest: 'bbbb' }), 1);
    assert.ok(valueOf(s, 'sidecar_injector_template_last_success_timestamp_seconds')! > 1000);
  });

  it('records the certificate expiry in Unix seconds', async () => {
    const m = createMetrics({ processMetrics: false });
    m.setCertificateExpiry(new Date('2030-01-02T03:04:05Z'));
    assert.equal(valueOf(await scrape(m), 'sidecar_injector_certificate_expiry_timestamp_seconds'), Date.UTC(2030, 0, 2, 3, 4, 5) / 1000);
  });

  it('writes the review latency histogram and the review counters as prom-client writes them, in the scrape, as JSON and after a reset', async () => {
    // prom-client's metrics, fed the same reviews by hand, are the reference for every line of the scrape.
    const reviews: Array<[endpoint: string, decision: string, reason: string, ms: number]> = [
      ['/mutate', 'injected', 'injected', 0.3],
      ['/mutate', 'injected', 'injected', 0.5],
      ['/mutate', 'skipped', 'not-opted-in', 2.5],
      ['/validate', 'allowed', 'sidecars-present', 0.0],
      ['/mutate', 'injected', 'injected', 7.1],
      ['/mutate', 'injected', 'injected', 20_000],
      ['/validate', 'allowed', 'sidecars-present', 1000],
      ['/mutate', 'skipped', 'not-opted-in', 0.1 + 0.2],
    ];
    const m = createMetrics({ processMetrics: false });
    const reference = new Registry();
    const latency = new Histogram({
      name: 'sidecar_injector_review_duration_seconds',
      help: 'Time from the start of reading a review to its answer, by endpoint and decision',
      labelNames: ['endpoint', 'decision'],
      buckets: [...LATENCY_BUCKETS],
      registers: [reference],
    });
    const counted = new Counter({
      name: 'sidecar_injector_reviews_total',
      help: 'AdmissionReviews answered, by endpoint, operation, decision (injected, skipped, allowed, denied, error) and reason',
      labelNames: ['endpoint', 'operation', 'decision', 'reason'],
      registers: [reference],
    });
    for (const [endpoint, decision, reason, ms] of reviews) {
      m.observeReview({
        endpoint,
        uid: 'u',
        operation: 'CREATE',
        namespace: 'shop',
        pod: 'web-',
        decision,
        reason,
        templates: [],
        patchOps: 0,
        cached: false,
        durationMs: ms,
      });
      latency.observe({ endpoint: endpoint.slice(1), decision }, ms / 1000);
      counted.inc({ endpoint: endpoint.slice(1), operation: 'CREATE', decision, reason });
    }
    const section = (text: string, name: string): string =>
      text
        .split('\n')
        .filter((line) => line.includes(`${name}`))
        .join('\n');
    const [ours, theirs] = [await m.registry.metrics(), await reference.metrics()];
    assert.ok(section(ours, 'review_duration_seconds_bucket').split('\n').length >= 3 * LATENCY_BUCKETS.length, 'too few bucket lines');
    assert.equal(section(ours, 'sidecar_injector_review_duration_seconds'), section(theirs, 'sidecar_injector_review_duration_seconds'));
    assert.equal(section(ours, 'sidecar_injector_reviews_total'), section(theirs, 'sidecar_injector_reviews_total'));
    assert.deepEqual(
      (await m.registry.getMetricsAsJSON()).find((x) => x.name === 'sidecar_injector_review_duration_seconds'),
      (await reference.getMetricsAsJSON()).find((x) => x.name === 'sidecar_injector_review_duration_seconds'),
    );
    m.registry.resetMetrics();
    reference.resetMetrics();
    assert.equal(section(await m.registry.metrics(), 'review_duration_seconds'), section(await reference.metrics(), 'review_duration_seconds'));
  });

  it("keeps the review metrics prom-client's own: what their API does shows in the scrape", async () => {
    const m = createMetrics({ processMetrics: false });
    m.observeReview({
      endpoint: '/mutate',
      uid: 'u',
      operation: 'CREATE',
      namespace: 'shop',
      pod: 'web-',
      decision: 'injected',
      reason: 'injected',
      templates: ['log-shipper'],
      patchOps: 2,
      cached: false,
      durationMs: 0.3,
    });
    // A series declared at zero (so rate() sees its first increase), through prom-client's own API.
    (m.registry.getSingleMetric('sidecar_injector_review_duration_seconds') as Histogram).zero({ endpoint: 'validate', decision: 'allowed' });
    (m.registry.getSingleMetric('sidecar_injector_reviews_total') as Counter).inc(
      { endpoint: 'validate', operation: 'CREATE', decision: 'allowed', reason: 'sidecars-present' },
      0,
    );
    const s = await scrape(m);
    assert.equal(valueOf(s, 'sidecar_injector_review_duration_seconds_count', { endpoint: 'mutate', decision: 'injected' }), 1);
    assert.equal(valueOf(s, 'sidecar_injector_review_duration_seconds_count', { endpoint: 'validate', decision: 'allowed' }), 0);
    assert.equal(valueOf(s, 'sidecar_injector_reviews_total', { endpoint: 'validate', decision: 'allowed' }), 0);
    assert.equal(valueOf(s, 'sidecar_injector_injections_total', { template: 'log-shipper' }), 1);
  });

  it('keeps the counts of two instances apart', async () => {
    const a = createMetrics({ processMetrics: false });
    const b = createMetrics({ processMetrics: false });
    a.observeReview(errorRecord('/mutate', 'POST', new InjectorError('BODY_EMPTY'), '', performance.now()));
    assert.equal(valueOf(await scrape(a), 'sidecar_injector_reviews_total', { reason: 'BODY_EMPTY' }), 1);
    assert.equal(valueOf(await scrape(b), 'sidecar_injector_reviews_total', { reason: 'BODY_EMPTY' }), undefined);
  });
});

describe('metric labels', () => {
  it('stay within closed sets: 3,000 reviews with distinct operations and namespaces leave /metrics the size it was, counting them as other', async () => {
    const server = await startTestServer();
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    try {
      const post = (path: string, review: unknown) => httpsRequest(`${server.url}${path}`, JSON.stringify(review), { ca: server.certs.ca.certPem, agent });
      const size = async () =>
        (await getText(`${server.healthUrl}/metrics`)).text
          .split('\n')
          .filter((l) => l.startsWith('sidecar_injector_'))
          .join('\n').length;
      // Every label value a request can reach, once, so the closed sets are all in use.
      await post('/mutate', podReview(optedInPod()));
      await post('/validate', podReview(optedInPod(), { namespace: 'shop' }));
      for (let i = 0; i < MAX_NAMESPACE_LABELS - 1; i++) await post('/validate', podReview(optedInPod(), { namespace: `ns-${i}` }));
      await post('/mutate', podReview(optedInPod(), { operation: 'NOT-AN-OPERATION' }));
      await post('/validate', podReview(optedInPod(), { namespace: 'ns-more' }));
      const before = await size();
      for (let i = 0; i < 300; i++) {
        await Promise.all(
          Array.from({ length: 10 }, (_, j) => {
            const n = i * 10 + j;
            return n % 2 === 0
              ? post('/mutate', podReview(optedInPod(), { operation: `OP-${n}-${'x'.repeat(100)}` }))
              : post('/validate', podReview(optedInPod(), { namespace: `namespace-${n}` }));
          }),
        );
      }
      const samples = parseSamples((await getText(`${server.healthUrl}/metrics`)).text);
      assert.ok((await size()) - before < 200, `/metrics grew from ${before} to ${await size()} characters`);
      assert.equal(
        valueOf(samples, 'sidecar_injector_reviews_total', { endpoint: 'mutate', operation: 'other', decision: 'skipped', reason: 'not-pod-create' }),
        1501,
      );
      assert.equal(valueOf(samples, 'sidecar_injector_validation_rejections_total', { namespace: 'other' }), 1501);
      assert.equal(valueOf(samples, 'sidecar_injector_validation_rejections_total', { namespace: 'ns-0' }), 1);
      assert.equal(samples.filter((s) => s.name === 'sidecar_injector_validation_rejections_total').length, MAX_NAMESPACE_LABELS + 1);
    } finally {
      agent.destroy();
      await server.close();
    }
  });

  it('maps decisions and reasons outside their sets, and malformed namespaces, to other', async () => {
    const m = createMetrics({ processMetrics: false });
    const record = { uid: 'u', operation: 'CREATE', namespace: 'Not_A_Namespace', pod: 'p', templates: [], patchOps: 0, cached: false, durationMs: 1 };
    m.observeReview({ ...record, endpoint: '/validate', decision: 'denied', reason: 'sidecars-missing' });
    m.observeReview({ ...record, endpoint: '/mutate', decision: 'made-up', reason: 'made-up-reason' });
    m.observeReview({ ...record, endpoint: '/mutate', decision: 'error', reason: 'NOT_A_CODE', status: 500 });
    const s = await scrape(m);
    assert.equal(valueOf(s, 'sidecar_injector_validation_rejections_total', { namespace: 'other' }), 1);
    assert.equal(valueOf(s, 'sidecar_injector_reviews_total', { endpoint: 'mutate', decision: 'other', reason: 'other' }), 1);
    assert.equal(valueOf(s, 'sidecar_injector_reviews_total', { endpoint: 'mutate', decision: 'error', reason: 'other' }), 1);
  });
});

async function scrape(m: ReturnType<typeof createMetrics>) {
  return parseSamples(await m.registry.metrics());
}

describe('certificate reload metrics', () => {
  it('export both results for both certificates from the start, and count each reload', async () => {
    const m = createMetrics({ processMetrics: false });
    let s = await scrape(m);
    for (const certificate of Object.values(CertificateKind)) {
      for (const result of Object.values(ReloadResult)) assert.equal(valueOf(s, 'sidecar_injector_certificate_reloads_total', { certificate, result }), 0);
    }
    m.recordCertificateReload(CertificateKind.Serving, ReloadResult.Failure);
    m.recordCertificateReload(CertificateKind.Serving, ReloadResult.Success);
    s = await scrape(m);
    assert.equal(valueOf(s, 'sidecar_injector_certificate_reloads_total', { certificate: 'serving', result: 'failure' }), 1);
    assert.equal(valueOf(s, 'sidecar_injector_certificate_reloads_total', { certificate: 'serving', result: 'success' }), 1);
  });
});

describe('build info metric', () => {
  it('exports sidecar_injector_build_info = 1 with the package version and the Node.js version', async () => {
    const { version } = JSON.parse(await readFile('package.json', 'utf8'));
    const samples = parseSamples(await createMetrics({ processMetrics: false }).registry.metrics());
    assert.equal(valueOf(samples, 'sidecar_injector_build_info', { version, node: process.versions.node }), 1);
  });
});

describe('event loop lag max', () => {
  const lagMax = async (m: ReturnType<typeof createMetrics>): Promise<number> =>
    valueOf(parseSamples(await m.registry.metrics()), 'nodejs_eventloop_lag_max_seconds')!;
  /** Blocks the event loop for `ms`, once its delay monitor has ticked a few times. */
  const stall = async (ms: number): Promise<void> => {
    await new Promise((r) => setTimeout(r, 50));
    const until = performance.now() + ms;
    while (performance.now() < until);
    // The monitor records the delay on its next tick.
    await new Promise((r) => setTimeout(r, 30));
  };

  it('reports a stall in every scrape, not only the first after it', async () => {
    const m = createMetrics();
    await stall(150);
    const first = await lagMax(m);
    const second = await lagMax(m);
    assert.ok(first >= 0.12, `the first scrape read ${first} s after a 150 ms stall`);
    assert.ok(second >= 0.12, `the second scrape read ${second} s: the first one reset it`);
  });

  it('keeps a stall for at least 60 s, then lets it go', async () => {
    let now = 5_000;
    const m = createMetrics({ now: () => now });
    await stall(150);
    assert.ok((await lagMax(m)) >= 0.12);
    // The last scrape that must still see it: 60 s after the one that first did.
    now += (LAG_SLOTS - 1) * LAG_SLOT_MS;
    assert.ok((await lagMax(m)) >= 0.12, 'gone before 60 s');
    now += 2 * LAG_SLOT_MS;
    const later = await lagMax(m);
    assert.ok(later < 0.1, `still ${later} s ${now / 1000 - 5} s after the stall`);
  });
});
