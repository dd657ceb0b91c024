import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorRecord, logReviews, reviewOutcome, reviewRecord } from '../../src/admission/record.js';
import { injected, passed } from '../../src/admission/verdict.js';
import { InjectorError } from '../../src/errors.js';
import { createLogger, LOG_FIELD_MAX } from '../../src/log.js';

function lines(): { readonly logged: any[]; readonly log: ReturnType<typeof logReviews> } {
  const logged: any[] = [];
  return { logged, log: logReviews(createLogger('info', { write: (line: string) => void logged.push(JSON.parse(line)) })) };
}

describe('the review record', () => {
  it('takes the facts of the request, clipped: namespace and name fall back to the pod, then to generateName', () => {
    const long = 'x'.repeat(1000);
    const outcome = reviewOutcome({ operation: long, object: { metadata: { generateName: 'web-', namespace: 'from-pod' } } }, passed('skipped', 'not-opted-in'));
    assert.deepEqual([outcome.namespace, outcome.pod], ['from-pod', 'web-']);
    assert.ok(outcome.operation.length <= LOG_FIELD_MAX + 32 && outcome.operation.endsWith('more)'));
    const named = reviewOutcome({ namespace: 'shop', name: 'req-name', object: { metadata: { name: { not: 'a string' } } } }, passed('skipped', 'not-opted-in'));
    assert.deepEqual([named.namespace, named.pod], ['shop', 'req-name']);
  });

  it('is logged as one line, with the field names of the log line', () => {
    const { logged, log } = lines();
    const outcome = reviewOutcome({ operation: 'CREATE', namespace: 'shop', object: { metadata: { name: 'web' } } }, passed('skipped', 'not-opted-in'));
    log(reviewRecord('/mutate', 'u-1', outcome, true, performance.now()));
    assert.equal(logged.length, 1);
    const { level, msg, endpoint, uid, operation, namespace, pod, decision, reason, templates, patchOps, cached, durationMs } = logged[0];
    assert.deepEqual({ level, msg, endpoint, uid, operation, namespace, pod, decision, reason, templates, patchOps, cached }, { level: 30, msg: 'review', endpoint: '/mutate', uid: 'u-1', operation: 'CREATE', namespace: 'shop', pod: 'web', decision: 'skipped', reason: 'not-opted-in', templates: [], patchOps: 0, cached: true });
    assert.equal(typeof durationMs, 'number');
  });

  it('writes an answered review as the very line pino writes for the record, escapes and all', () => {
    const written: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void written.push(line) });
    const outcome = reviewOutcome({ operation: 'CREATE', namespace: 'shop', object: { metadata: { name: 'we"b\\\n\u2028é' } } }, injected('injected', ['log-shipper', 'a"b'], 3, 'W10=', []));
    const record = reviewRecord('/mutate', 'u-"1"', outcome, false, performance.now());
    logReviews(logger)(record);
    logger.info(record, 'review');
    assert.equal(written.length, 2);
    // The same millisecond, or the time is the only difference.
    const untimed = written.map((l) => l.replace(/"time":"[^"]+"/, '"time":""'));
    assert.equal(untimed[0], untimed[1]);
    assert.ok(written[0]!.endsWith('\n'));
  });

  it('writes each line of a run as pino does, whichever fields repeat the last line\'s values and whichever change', () => {
    const written: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void written.push(line) });
    const log = logReviews(logger);
    const kept = reviewOutcome({ operation: 'CREATE', namespace: 'shop', object: { metadata: { generateName: 'web-' } } }, injected('injected', ['log-shipper'], 3, 'W10=', []));
    const other = reviewOutcome({ operation: 'UPDATE', namespace: 'shop', object: { metadata: { name: 'db-0' } } }, passed('skipped', 'not-opted-in'));
    const records = [kept, kept, other, kept, reviewOutcome({ operation: 'CREATE', namespace: 'shop', object: { metadata: { generateName: 'web-' } } }, injected('injected', ['log-shipper', 'proxy'], 5, 'W10=', []))].map((outcome, i) =>
      reviewRecord('/mutate', `u-${i}`, outcome, i % 2 === 0, performance.now()),
    );
    for (const record of records) {
      log(record);
      logger.info(record, 'review');
    }
    const untimed = written.map((l) => l.replace(/"time":"[^"]+"/, '"time":""').replace(/"durationMs":[^,}]+/, '"durationMs":0'));
    for (let i = 0; i < records.length; i++) assert.equal(untimed[2 * i], untimed[2 * i + 1], `line ${i}`);
    assert.deepEqual(written.filter((_, i) => i % 2 === 0).map((l) => JSON.parse(l).patchOps), [3, 3, 0, 3, 5]);
  });

  it('writes through pino a logger whose lines pino shapes further (a message prefix)', () => {
    const written: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void written.push(line) }).child({ team: 'a' }, { msgPrefix: 'webhook: ' });
    logReviews(logger)(reviewRecord('/mutate', 'u-1', reviewOutcome({}, passed('skipped', 'not-opted-in')), true, performance.now()));
    const line = JSON.parse(written[0]!);
    assert.deepEqual([line.msg, line.team, line.uid, line.decision], ['webhook: review', 'a', 'u-1', 'skipped']);
  });

  it('writes nothing for an answered review while info is off', () => {
    const written: string[] = [];
    const logger = createLogger('warn', { write: (line: string) => void written.push(line) });
    logReviews(logger)(reviewRecord('/mutate', 'u-1', reviewOutcome({}, passed('skipped', 'not-opted-in')), true, performance.now()));
    logger.level = 'info';
    logReviews(logger)(reviewRecord('/mutate', 'u-2', reviewOutcome({}, passed('skipped', 'not-opted-in')), true, performance.now()));
    assert.deepEqual(written.map((l) => JSON.parse(l).uid), ['u-2']);
  });

  it('of an HTTP error says error, its code and status, at warn for a client mistake and at error with the stack for a fault', () => {
    const { logged, log } = lines();
    const started = performance.now();
    log(errorRecord('/nowhere', 'POST', new InjectorError('NOT_FOUND', ['/nowhere']), '', started));
    log(errorRecord('/mutate', 'POST', new InjectorError('INTERNAL', ['boom'], { cause: new TypeError('boom') }), 'u-2', started));
    assert.deepEqual(
      logged.map((l) => [l.level, l.endpoint, l.uid, l.decision, l.reason, l.code, l.status, l.method]),
      [
        [40, '/nowhere', '', 'error', 'NOT_FOUND', 'NOT_FOUND', 404, 'POST'],
        [50, '/mutate', 'u-2', 'error', 'INTERNAL', 'INTERNAL', 500, 'POST'],
      ],
    );
    assert.equal(logged[0].err, undefined);
    assert.match(logged[1].err.stack, /TypeError: boom/);
  });
});
