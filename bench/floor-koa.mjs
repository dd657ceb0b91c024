// The Koa floor: what any webhook on this project's stack must spend on a review, with nothing of
// the product's own work in it. The bare floor's work (bench/floor.mjs: read the body, JSON.parse
// it, answer with the uid), plus what the stack and a safe answer cache add: a Koa app with one
// middleware, the body read with raw-body, the product's review line written through the
// product's logger (info, batched to stdout), and an answer as long as the product's to that pod
// (sent as an audit annotation the apiserver ignores). A body that repeats but for its uid, as the
// pods of one ReplicaSet do, is known by the SHA-256 of its bytes after the uid and answered, from
// its second sighting on, with a prepared text and the new uid: no JSON.parse, no JSON.stringify.
// `npm run bench` runs it beside the floor and the product under apisim: the budget's lines of this
// server are the measured floor of Koa, the body middleware, the log line, the answer cache and the
// answer's write (docs/performance.md).
//
// Usage (after npm run build): node bench/floor-koa.mjs <port> <tls.crt> <tls.key> [sizes]
// sizes: "bodyBytes:answerBytes,...", the product's answer length to each pod the bench sends; a
// body gets the answer length of the nearest body size (3300 bytes without any).
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import Koa from 'koa';
import getRawBody from 'raw-body';
import { createLogger } from '../dist/src/log.js';

const [port, certFile, keyFile, sizes = ''] = process.argv.slice(2);
const answerSizes = sizes
  .split(',')
  .filter(Boolean)
  .map((pair) => pair.split(':').map(Number));
const logger = createLogger('info');
// How the apiserver begins every review: kind, apiVersion, then request.uid (Go's field order).
const HEAD = /^\{"kind":"AdmissionReview","apiVersion":"([^"\\]+)","request":\{"uid":"([^"\\]*)"/;
/** The answer's text before and after the uid, by key, from a body's second sighting on. */
const answers = new Map();
/** Keys seen once lately. */
const seen = new Set();

function answerBytes(bodyBytes) {
  let best = [0, 3300];
  for (const pair of answerSizes) if (Math.abs(pair[0] - bodyBytes) < Math.abs(best[0] - bodyBytes)) best = pair;
  return best[1];
}

/** The padding that makes an answer to a body of `bodyBytes` as long as the product's, by answer length. */
const pads = new Map();
function padFor(apiVersion, bodyBytes) {
  const bytes = answerBytes(bodyBytes);
  let pad = pads.get(bytes);
  if (pad === undefined) {
    const empty = JSON.stringify({ kind: 'AdmissionReview', apiVersion, response: { uid: '', allowed: true, auditAnnotations: { pad: '' } } });
    // A uid is 36 characters.
    pads.set(bytes, (pad = 'x'.repeat(Math.max(0, bytes - empty.length - 36))));
  }
  return pad;
}

const app = new Koa();
app.use(async (ctx, next) => {
  const started = performance.now();
  await next();
  logger.info(
    {
      endpoint: '/mutate',
      uid: ctx.state.uid,
      operation: 'CREATE',
      namespace: 'shop',
      pod: 'checkout-6d4f9c7b8-',
      decision: 'injected',
      reason: 'injected',
      templates: ['log-shipper'],
      patchOps: 9,
      cached: ctx.state.cached,
      durationMs: Math.round((performance.now() - started) * 1e3) / 1e3,
    },
    'review',
  );
});
app.use(async (ctx) => {
  if (ctx.method === 'GET') return void (ctx.body = 'ok');
  const body = await getRawBody(ctx.req, { length: ctx.req.headers['content-length'], limit: 7 * 1024 * 1024 });
  ctx.type = 'application/json';
  const head = HEAD.exec(body.toString('latin1', 0, 200));
  const key = head && head[1] + hash('sha256', body.subarray(head[0].length), 'base64');
  const kept = key && answers.get(key);
  ctx.state.cached = Boolean(kept);
  if (kept) {
    ctx.state.uid = head[2];
    ctx.body = kept[0] + head[2] + kept[1];
    return;
  }
  const review = JSON.parse(body.toString('utf8'));
  const uid = review.request.uid;
  const text = JSON.stringify({
    kind: 'AdmissionReview',
    apiVersion: review.apiVersion,
    response: { uid, allowed: true, auditAnnotations: { pad: padFor(review.apiVersion, body.length) } },
  });
  if (key && seen.has(key)) {
    if (answers.size >= 1024) answers.clear();
    const at = text.indexOf(`"uid":${JSON.stringify(uid)}`) + '"uid":"'.length;
    answers.set(key, [text.slice(0, at), text.slice(at + uid.length)]);
  } else if (key) {
    if (seen.size >= 4096) seen.clear();
    seen.add(key);
  }
  ctx.state.uid = uid;
  ctx.body = text;
});
const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, app.callback());
server.keepAliveTimeout = 120_000;
server.listen(Number(port), '127.0.0.1');
process.once('SIGTERM', () => process.exit(0));
