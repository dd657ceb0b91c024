import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { createHealthServer } from '../../src/server/health.js';
import { errorCode, webhookCallError } from '../helpers/client-go.js';

describe('health port errors', () => {
  let server: Server;
  let base: string;
  before(async () => {
    const routes = new Map([
      ['/broken', () => Promise.reject(new Error('registry unavailable'))],
      [
        '/half',
        (_req: unknown, res: import('node:http').ServerResponse) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('partial');
          return Promise.reject(new Error('failed mid-answer'));
        },
      ],
    ]);
    server = createHealthServer({ isReady: () => true, routes });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const call = (path: string, method = 'GET') =>
    new Promise<{ status: number; headers: Record<string, unknown>; text: string; error?: string }>((resolve) => {
      const req = request(`${base}${path}`, { method }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), error: err.message }),
        );
      });
      req.on('error', (err) => resolve({ status: 0, headers: {}, text: '', error: err.message }));
      req.end();
    });

  for (const [name, path, method, status, code] of [
    ['an unknown path', '/nope', 'GET', 404, 'NOT_FOUND'],
    ['a POST', '/healthz', 'POST', 405, 'METHOD_NOT_ALLOWED'],
    ['a route that fails', '/broken', 'GET', 500, 'INTERNAL'],
  ] as const) {
    it(`answers ${name} with ${status} and a Status in the review port's shape`, async () => {
      const res = await call(path, method);
      assert.equal(res.status, status);
      const seen = webhookCallError('health', { status: res.status, contentType: res.headers['content-type'] as string, text: res.text });
      assert.equal(seen.notStatus, undefined, res.text);
      assert.equal(errorCode(JSON.parse(res.text)), code);
      if (status === 405) assert.equal(res.headers['allow'], 'GET, HEAD');
    });
  }

  it('drops the connection of a route that fails after its answer began, and keeps serving', async () => {
    const res = await call('/half');
    assert.equal(res.status, 200);
    assert.ok(res.error !== undefined || !res.text.includes('Status'), 'no error body written into a begun answer');
    assert.equal((await call('/healthz')).status, 200);
  });
});
