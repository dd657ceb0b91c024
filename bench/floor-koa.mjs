// A second floor: what any Koa webhook that logs its reviews must spend, with nothing of the
// product's review in it. A bare Koa app on node:https that reads the body with raw-body, answers
// `allowed: true` with the uid and an answer as long as the product's for the typical pod (the
// patch's length, as an audit annotation the apiserver ignores), and writes the product's review
// line through the product's logger (info, batched to stdout). No JSON.parse: the uid is read
// where the apiserver writes it, as the product's answer cache does, so this is the floor of the
// pods of one ReplicaSet, whose reviews the product answers without parsing them.
//
// Usage (after npm run build): node bench/floor-koa.mjs <port> <tls.crt> <tls.key>
// In the bench: npm run bench -- --floor bench/floor-koa.mjs
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import Koa from 'koa';
import getRawBody from 'raw-body';
import { createLogger } from '../dist/src/log.js';

const [port, certFile, keyFile] = process.argv.slice(2);
const logger = createLogger('info');
const PAD = 'x'.repeat(2400);
const HEAD = '{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"';
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
      cached: true,
      durationMs: Math.round((performance.now() - started) * 1e3) / 1e3,
    },
    'review',
  );
});
app.use(async (ctx) => {
  if (ctx.method === 'GET') return void (ctx.body = 'ok');
  const body = await getRawBody(ctx.req, { length: ctx.req.headers['content-length'], limit: 7 * 1024 * 1024 });
  const end = body.indexOf(0x22, HEAD.length);
  const uid = body.toString('latin1', HEAD.length, end);
  ctx.state.uid = uid;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify({ kind: 'AdmissionReview', apiVersion: 'admission.k8s.io/v1', response: { uid, allowed: true, auditAnnotations: { pad: PAD } } });
});
const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, app.callback());
server.keepAliveTimeout = 120_000;
server.listen(Number(port), '127.0.0.1');
process.once('SIGTERM', () => process.exit(0));
