// Experiment: the floor's work done through Koa + raw-body, to price the framework.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import Koa from 'koa';
import getRawBody from 'raw-body';
const [port, certFile, keyFile] = process.argv.slice(2);
const app = new Koa();
app.use(async (ctx, next) => { try { await next(); } catch (e) { ctx.status = 500; } });
app.use(async (ctx) => {
  const text = await getRawBody(ctx.req, { limit: 7e6, encoding: 'utf8', length: ctx.req.headers['content-length'] });
  const review = JSON.parse(text);
  ctx.type = 'application/json';
  ctx.body = JSON.stringify({ apiVersion: review.apiVersion, kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true } });
});
const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, app.callback());
server.keepAliveTimeout = 120_000;
server.listen(Number(port), '127.0.0.1');
process.once('SIGTERM', () => process.exit(0));
