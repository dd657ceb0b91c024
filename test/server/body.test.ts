import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import type { InjectorError } from '../../src/errors.js';
import { readBody as readBodyThen, TransitBudget, type ReadBodyOptions } from '../../src/server/body.js';
import { Deadlines } from '../../src/server/deadlines.js';
import { memoryAfterGc } from '../helpers/memory.js';

/** A request body stream with the headers readBody looks at. */
function request(headers: Record<string, string> = {}): PassThrough & IncomingMessage {
  return Object.assign(new PassThrough(), { headers }) as unknown as PassThrough & IncomingMessage;
}

/** readBody's outcome as a promise: its bytes, or its error. */
function readBody(req: IncomingMessage, opts: ReadBodyOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => readBodyThen(req, opts, (err, bytes) => (err === undefined ? resolve(bytes!) : reject(err))));
}

const code = (expected: string) => (err: InjectorError) => err.code === expected;

describe('readBody', () => {
  it('reads a whole body and gives its bytes in transit back', async () => {
    const transit = new TransitBudget(1024);
    const req = request();
    const read = readBody(req, { deadlines: new Deadlines(1000), transit });
    req.write('{"a":');
    await new Promise((r) => setImmediate(r));
    assert.equal(transit.used, 5, 'the bytes received so far are in transit');
    req.end('1}');
    assert.equal((await read).toString(), '{"a":1}');
    assert.equal(transit.used, 0);
  });

  it('drops a body not complete within the timeout with BODY_TIMEOUT (408), giving its bytes back', async () => {
    const transit = new TransitBudget(1024);
    const req = request();
    const read = readBody(req, { deadlines: new Deadlines(50), transit });
    req.write('{');
    // Deadlines never keep a process alive (in the product the server does): this test keeps it.
    const alive = setInterval(() => {}, 1000);
    await assert.rejects(read, (err: InjectorError) => err.code === 'BODY_TIMEOUT' && err.status === 408).finally(() => clearInterval(alive));
    assert.equal(transit.used, 0);
  });

  it('refuses a body that does not fit the transit budget with OVERLOADED (429), giving back what it held', async () => {
    const transit = new TransitBudget(10);
    assert.ok(transit.take(4)); // another body in transit
    const req = request();
    const read = readBody(req, { deadlines: new Deadlines(1000), transit });
    req.write('12345');
    req.write('67');
    await assert.rejects(read, (err: InjectorError) => err.code === 'OVERLOADED' && err.status === 429);
    assert.equal(transit.used, 4, 'only the other body\'s bytes remain');
  });

  it('refuses a body whose Content-Length is over the limit before reading it, and one that grows past it', async () => {
    const transit = new TransitBudget(1024);
    await assert.rejects(readBody(request({ 'content-length': '11' }), { limit: 10, deadlines: new Deadlines(1000), transit }), code('BODY_TOO_LARGE'));
    const req = request();
    const read = readBody(req, { limit: 10, deadlines: new Deadlines(1000), transit });
    req.write('x'.repeat(11));
    await assert.rejects(read, code('BODY_TOO_LARGE'));
    assert.equal(transit.used, 0);
  });

  it('answers a client that went away with BODY_ABORTED, giving its bytes back', async () => {
    const transit = new TransitBudget(1024);
    const req = request();
    const read = readBody(req, { deadlines: new Deadlines(1000), transit });
    req.write('{"a"');
    await new Promise((r) => setImmediate(r));
    req.destroy();
    await assert.rejects(read, code('BODY_ABORTED'));
    assert.equal(transit.used, 0);
  });

  it('refuses an empty body, or one of white space alone, with BODY_EMPTY', async () => {
    for (const body of [undefined, '  ', '\r\n\t', '\u00a0\ufeff\u2028 ']) {
      const req = request();
      const read = readBody(req, { deadlines: new Deadlines(1000), transit: new TransitBudget(1024) });
      req.end(body);
      await assert.rejects(read, code('BODY_EMPTY'), JSON.stringify(body));
    }
    const req = request();
    const read = readBody(req, { deadlines: new Deadlines(1000), transit: new TransitBudget(1024) });
    req.end(' x ');
    assert.equal((await read).toString(), ' x ', 'anything else is the decoder\'s to refuse');
  });

  it('holds none of a body once it is read, though the request lives on until its answer is flushed', async () => {
    // The request lives as long as its answer waits for the client (res.req), and the listeners
    // stay on it: they must not keep the chunks or their joined copy.
    const settle = async (): Promise<number> => (await memoryAfterGc()).arrayBuffers;
    const held: IncomingMessage[] = [];
    const before = await settle();
    for (let i = 0; i < 16; i++) {
      const req = request();
      const read = readBody(req, { deadlines: new Deadlines(1000), transit: new TransitBudget(64 * 1024 * 1024) });
      for (let c = 0; c < 16; c++) req.write(Buffer.alloc(64 * 1024, 'a'));
      req.end();
      assert.equal((await read).length, 1024 * 1024);
      held.push(req);
    }
    const grown = (await settle()) - before;
    assert.ok(grown < 4 * 1024 * 1024, `${(grown / 2 ** 20).toFixed(1)} MiB of 16 bodies of 1 MiB still held by their 16 requests`);
    assert.equal(held.length, 16);
  });
});
