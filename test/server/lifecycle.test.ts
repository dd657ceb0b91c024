import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { get as httpGet } from 'node:http';
import { Agent, request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { optedInPod, podReview } from '../helpers/review.js';
import { openTls } from '../helpers/raw.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { makeTestCerts } from '../helpers/tls.js';

const DELAY_S = 1;

function readyz(port: number): Promise<number> {
  return new Promise((resolve, reject) =>
    httpGet({ host: '127.0.0.1', port, path: '/readyz' }, (res) => (res.resume(), resolve(res.statusCode ?? 0))).on('error', reject),
  );
}

/** One review; `bodyDelayMs` holds back the second half of the body, so the review is in flight for that long. */
function review(port: number, ca: string, agent: Agent | false, bodyDelayMs = 0): Promise<{ status: number; connection: string | undefined }> {
  const body = Buffer.from(JSON.stringify(podReview(optedInPod())));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate',
        method: 'POST',
        ca,
        servername: 'localhost',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
      },
    );
    // A connection reset before its TLS handshake finished carried no request: the server never accepted it.
    let sent = false;
    req.on('socket', (socket) => {
      if ((socket as TLSSocket).encrypted && !(socket as TLSSocket).connecting && (socket as TLSSocket).authorized) sent = true;
      socket.once('secureConnect', () => (sent = true));
    });
    req.on('error', (err: NodeJS.ErrnoException) => reject(Object.assign(err, { accepted: sent })));
    if (bodyDelayMs === 0) return void req.end(body);
    req.write(body.subarray(0, 100));
    setTimeout(() => req.end(body.subarray(100)), bodyDelayMs);
  });
}

describe('serve lifecycle', () => {
  it('on SIGTERM turns unready at once, keeps answering through the delay, drains in-flight reviews and exits 0', async () => {
    const certs = await makeTestCerts();
    const server = await startServeProcess(['--cert-dir', certs.certDir, '--shutdown-delay', String(DELAY_S), '--drain-timeout', '10']);
    const ca = certs.ca.certPem;
    assert.equal(await readyz(server.healthPort), 200);

    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    let stop = false;
    try {
      const outcomes: { at: number; status?: number; error?: string; accepted?: boolean }[] = [];
      let signalledAt = Infinity;
      const worker = async (a: Agent | false): Promise<void> => {
        while (!stop) {
          const at = Date.now();
          try {
            outcomes.push({ at, status: (await review(server.port, ca, a)).status });
          } catch (err) {
            outcomes.push({
              at,
              error: (err as NodeJS.ErrnoException).code ?? (err as Error).message,
              accepted: (err as { accepted?: boolean }).accepted === true,
            });
            if (at > signalledAt) await new Promise((r) => setTimeout(r, 20));
          }
        }
      };
      const workers = [worker(agent), worker(agent), worker(false), worker(false)];
      await new Promise((r) => setTimeout(r, 300));

      signalledAt = Date.now();
      server.child.kill('SIGTERM');
      // Readiness falls at once, while reviews are still answered.
      let unreadyAfter = Infinity;
      while (Date.now() - signalledAt < DELAY_S * 1000) {
        if ((await readyz(server.healthPort)) === 503) {
          unreadyAfter = Date.now() - signalledAt;
          break;
        }
      }
      // The contract: unready before the shutdown delay ends, so endpoints drop the pod while it still answers.
      assert.ok(unreadyAfter < DELAY_S * 1000, `still ready ${unreadyAfter} ms after SIGTERM`);
      const during = await review(server.port, ca, false);
      assert.equal(during.status, 200);
      assert.equal(during.connection, 'close', 'answers during the drain close their connection');
      // A review accepted near the end of the delay, whose body is still arriving when the listener closes.
      // Timed from the signal, not from the review above, which a busy machine can make slow.
      await new Promise((r) => setTimeout(r, Math.max(0, signalledAt + DELAY_S * 1000 - 300 - Date.now())));
      const inflight = review(server.port, ca, false, 800);
      // A connection the apiserver has just dialled: handshake done, first request not yet sent when the listener closes.
      const fresh = await openTls(server.port, ca);
      const late = new Promise<string>((resolve) => {
        let text = '';
        fresh.on('data', (d: Buffer) => (text += d.toString()));
        fresh.on('close', () => resolve(text));
        fresh.on('error', () => undefined);
      });
      await new Promise((r) => setTimeout(r, 600));
      const body = JSON.stringify(podReview(optedInPod()));
      fresh.write(`POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);

      assert.equal(await server.exited, 0);
      assert.deepEqual(server.notJson, [], 'every line it wrote, the last ones too, is JSON');
      stop = true;
      await Promise.all(workers);
      agent.destroy();
      assert.equal((await inflight).status, 200, 'the in-flight review finished');
      assert.match(await late, /^HTTP\/1\.1 200 /, 'a connection opened before the listener closed was answered');

      const accepted = outcomes.filter((o) => o.error === undefined || o.accepted);
      const failed = accepted.filter((o) => o.status !== 200);
      assert.deepEqual(
        failed.map((f) => ({ ...f, at: f.at - signalledAt })),
        [],
        'no accepted review failed',
      );
      const afterSignal = outcomes.filter((o) => o.at > signalledAt && o.status === 200);
      assert.ok(afterSignal.length > 10, `reviews kept being answered after SIGTERM: ${afterSignal.length}`);
      assert.ok(
        outcomes.some((o) => o.error === 'ECONNREFUSED'),
        'the listener closed before exit',
      );
    } finally {
      // Whatever failed above, leave no client loop or server process behind to hold the test run open.
      stop = true;
      agent.destroy();
      await server.kill();
    }
  });
});
