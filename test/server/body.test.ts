import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import type { InjectorError } from '../../src/errors.js';
import { CHUNK_OVERHEAD_BYTES, readBody, TransitBudget } from '../../src/server/body.js';
import { memoryAfterGc } from '../helpers/memory.js';

/** A request body stream whose Content-Length announces `length` bytes (none: a chunked body). */
function request(length: number | undefined): PassThrough & IncomingMessage {
  const headers = length === undefined ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(length) };
  return Object.assign(new PassThrough(), { headers }) as unknown as PassThrough & IncomingMessage;
}

const code = (expected: string) => (err: InjectorError) => err.code === expected;
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('readBody', () => {
  it('reads a whole body and gives its memory in transit back', async () => {
    const transit = new TransitBudget(4096);
    const req = request(7);
    const read = readBody(req, { timeoutMs: 1000, transit });
    req.write('{"a":');
    await tick();
    assert.equal(transit.used, 5 + CHUNK_OVERHEAD_BYTES, 'the bytes received so far, and their chunk, are in transit');
    req.end('1}');
    assert.equal((await read).toString(), '{"a":1}');
    assert.equal(transit.used, 0);
  });

  it('refuses a body without Content-Length (chunked) with LENGTH_REQUIRED (411) before reading it', async () => {
    const req = request(undefined);
    await assert.rejects(
      readBody(req, { timeoutMs: 1000, transit: new TransitBudget(4096) }),
      (err: InjectorError) => err.code === 'LENGTH_REQUIRED' && err.status === 411,
    );
    assert.equal(req.readableFlowing, null, 'not a byte read');
  });

  it('drops a body not complete within the timeout with BODY_TIMEOUT (408), giving its memory back', async () => {
    const transit = new TransitBudget(4096);
    const req = request(10);
    const read = readBody(req, { timeoutMs: 50, transit });
    req.write('{');
    await assert.rejects(read, (err: InjectorError) => err.code === 'BODY_TIMEOUT' && err.status === 408);
    assert.equal(transit.used, 0);
  });

  it('refuses a body that does not fit the transit budget with OVERLOADED (429), giving back what it held', async () => {
    const transit = new TransitBudget(2 * CHUNK_OVERHEAD_BYTES + 10);
    assert.ok(transit.take(4)); // another body in transit
    const req = request(7);
    const read = readBody(req, { timeoutMs: 1000, transit });
    req.write('12345');
    await tick();
    req.write('67');
    await assert.rejects(read, (err: InjectorError) => err.code === 'OVERLOADED' && err.status === 429);
    assert.equal(transit.used, 4, "only the other body's bytes remain");
  });

  it('charges a body sent in tiny chunks for each chunk, so such a body cannot hold more memory than the budget', async () => {
    const transit = new TransitBudget(64 * 1024);
    const req = request(1000);
    const refused = assert.rejects(readBody(req, { timeoutMs: 1000, transit }), code('OVERLOADED'));
    for (let i = 0; i < 1000; i++) {
      req.write('x');
      await tick();
    }
    await refused;
    assert.equal(transit.used, 0);
  });

  it('refuses a body whose Content-Length is over the limit before reading it', async () => {
    const req = request(11);
    await assert.rejects(readBody(req, { limit: 10, timeoutMs: 1000, transit: new TransitBudget(4096) }), code('BODY_TOO_LARGE'));
    assert.equal(req.readableFlowing, null, 'not a byte read: Node discards the rest, so the 413 reaches a client still writing');
  });

  it('answers a client that went away with BODY_ABORTED, giving its memory back', async () => {
    const transit = new TransitBudget(4096);
    const req = request(100);
    const read = readBody(req, { timeoutMs: 1000, transit });
    req.write('{"a"');
    await tick();
    req.emit('aborted');
    req.destroy();
    await assert.rejects(read, code('BODY_ABORTED'));
    assert.equal(transit.used, 0);
  });

  it('refuses an empty body, or one of white space alone, with BODY_EMPTY', async () => {
    for (const body of ['', '  ', '\r\n\t', '\u00a0\ufeff\u2028 ']) {
      const req = request(Buffer.byteLength(body));
      const read = readBody(req, { timeoutMs: 1000, transit: new TransitBudget(4096) });
      req.end(body);
      await assert.rejects(read, code('BODY_EMPTY'), JSON.stringify(body));
    }
    const req = request(3);
    const read = readBody(req, { timeoutMs: 1000, transit: new TransitBudget(4096) });
    req.end(' x ');
    assert.equal((await read).toString(), ' x ', "anything else is the decoder's to refuse");
  });

  it('holds none of a body once it is read, though the request lives on until its answer is flushed', async () => {
    // The request lives as long as its answer waits for the client (res.req): it must not keep
    // the chunks or their joined copy.
    const settle = async (): Promise<number> => (await memoryAfterGc()).arrayBuffers;
    const held: IncomingMessage[] = [];
    const before = await settle();
    for (let i = 0; i < 16; i++) {
      const req = request(1024 * 1024);
      const read = readBody(req, { timeoutMs: 1000, transit: new TransitBudget(64 * 1024 * 1024) });
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
