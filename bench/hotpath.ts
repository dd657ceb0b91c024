/**
 * In-process cost of each step of a review, without the network: JSON.parse of the body, the
 * envelope check, the mutating handler (selection, injection, diff, base64 patch), the answer's
 * JSON, the log line and the metrics. Shows where the product's CPU per review goes beyond the floor.
 *
 * Usage: node --import tsx bench/hotpath.ts [typical|small|large] [iterations]
 */
import { Writable } from 'node:stream';
import { mutate } from '../src/admission/handlers.js';
import { decodeReview, encodeReview } from '../src/admission/review.js';
import { createLogger } from '../src/log.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { loadTemplateSet } from '../src/templates/load.js';
import { Pods, reviewTemplate, type PodSize } from './pods.js';

const size = (process.argv[2] ?? 'typical') as PodSize;
const iterations = Number(process.argv[3] ?? 20000);
const t = reviewTemplate(Pods[size]);
const text = Buffer.concat([t.prefix, Buffer.from('00000000-0000-4000-8000-000000000001'), t.suffix]).toString('utf8');
const set = await loadTemplateSet('templates');
const metrics = createMetrics({ processMetrics: false });
const sink = new Writable({ write: (_c, _e, cb) => cb() });
const logger = createLogger('info', sink as never);

function time(name: string, fn: () => unknown): void {
  for (let i = 0; i < Math.min(2000, iterations); i++) fn();
  const start = process.cpuUsage();
  for (let i = 0; i < iterations; i++) fn();
  const used = process.cpuUsage(start);
  process.stdout.write(`${name.padEnd(34)} ${(((used.user + used.system) / iterations) * 1).toFixed(2).padStart(8)} µs\n`);
}

const parsed = JSON.parse(text);
const review = decodeReview(parsed);
const result = mutate(review.request, set);
process.stdout.write(`${size}: body ${text.length} bytes, ${result.patchOps} patch ops, answer ${encodeReview(review.apiVersion, result.response).length} bytes\n`);
time('JSON.parse(body)', () => JSON.parse(text));
time('decodeReview (envelope)', () => decodeReview(parsed));
time('mutate (select+inject+diff+patch)', () => mutate(review.request, set));
time('encodeReview (answer JSON)', () => encodeReview(review.apiVersion, result.response));
time('metrics.observeReview', () => metrics.observeReview('/mutate', review.request, result, 0.0004));
time('logger.info (one review line)', () =>
  logger.info({ endpoint: '/mutate', uid: review.request.uid, operation: 'CREATE', namespace: 'shop', pod: 'checkout-', decision: result.decision, reason: result.reason, templates: result.templates, patchOps: result.patchOps, durationMs: 0.4 }, 'review'),
);
time('all of the above', () => {
  const r = decodeReview(JSON.parse(text));
  const res = mutate(r.request, set);
  encodeReview(r.apiVersion, res.response);
  metrics.observeReview('/mutate', r.request, res, 0.0004);
});
