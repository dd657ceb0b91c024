// The floor: the least any webhook in Node must do for a review. A bare node:https server that reads
// the body, JSON.parses it and answers `allowed: true` with the uid, nothing else. Plain JavaScript
// on purpose, so it runs on bare `node` with no loader and its memory is node's own.
//
// Usage: node bench/floor.mjs <port> <tls.crt> <tls.key>
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

const [port, certFile, keyFile] = process.argv.slice(2);
const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
  if (req.method === 'GET' && req.url === '/readyz') return void res.end('ok');
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const review = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const body = JSON.stringify({
      apiVersion: review.apiVersion,
      kind: 'AdmissionReview',
      response: { uid: review.request.uid, allowed: true },
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 120_000;
server.listen(Number(port), '127.0.0.1');
process.once('SIGTERM', () => process.exit(0));
