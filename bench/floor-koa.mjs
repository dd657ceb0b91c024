// The Koa floor: what any webhook on this project's stack must spend on a review, with nothing of
// the product's own work in it. The bare floor's work (bench/floor.mjs: read the body, JSON.parse
// it, answer with the uid), plus what the stack adds: a Koa app with one middleware, the body read
// with raw-body, the product's review line written through the product's logger (info, batched to
// stdout), and an answer as long as the product's (the patch's length, given as the fourth
// argument, sent as an audit annotation the apiserver ignores). `npm run bench` runs it beside the
// floor and the product under apisim: the budget's lines of this server are the measured floor of
// Koa, the body middleware, the log line and the answer's write (docs/performance.md).
//
// Usage (after npm run build): node bench/floor-koa.mjs <port> <tls.crt> <tls.key> [answer bytes]
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import Koa from 'koa';
import getRawBody from 'raw-body';
import { createLogger } from '../dist/src/log.js';

const [port, certFile, keyFile, answerBytes = '3300'] = process.argv.slice(2);
const logger = createLogger('info');
const envelope = JSON.stringify({
  kind: 'AdmissionReview',
  apiVersion: 'admission.k8s.io/v1',
  response: { uid: '', allowed: true, auditAnnotations: { pad: '' } },
});
// A uid is 36 characters.
const PAD = 'x'.repeat(Math.max(0, Number(answerBytes) - envelope.length - 36));
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
      cached: false,
      durationMs: Math.round((performance.now() - started) * 1e3) / 1e3,
    },
    'review',
  );
});
app.use(async (ctx) => {
  if (ctx.method === 'GET') return void (ctx.body = 'ok');
  const body = await getRawBody(ctx.req, { length: ctx.req.headers['content-length'], limit: 7 * 1024 * 1024 });
  const review = JSON.parse(body.toString('utf8'));
  ctx.state.uid = review.request.uid;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify({
    kind: 'AdmissionReview',
    apiVersion: review.apiVersion,
    response: { uid: review.request.uid, allowed: true, auditAnnotations: { pad: PAD } },
  });
});
const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, app.callback());
server.keepAliveTimeout = 120_000;
server.listen(Number(port), '127.0.0.1');
process.once('SIGTERM', () => process.exit(0));
