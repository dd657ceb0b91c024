import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorRecord, logReviews, reviewOutcome, reviewRecord } from '../../src/admission/record.js';
import { passed } from '../../src/admission/verdict.js';
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
    log(reviewRecord('/mutate', 'u-1', outcome, true, process.hrtime.bigint()));
    assert.equal(logged.length, 1);
    const { level, msg, endpoint, uid, operation, namespace, pod, decision, reason, templates, patchOps, cached, durationMs } = logged[0];
    assert.deepEqual({ level, msg, endpoint, uid, operation, namespace, pod, decision, reason, templates, patchOps, cached }, { level: 30, msg: 'review', endpoint: '/mutate', uid: 'u-1', operation: 'CREATE', namespace: 'shop', pod: 'web', decision: 'skipped', reason: 'not-opted-in', templates: [], patchOps: 0, cached: true });
    assert.equal(typeof durationMs, 'number');
  });

  it('of an HTTP error says error, its code and status, at warn for a client mistake and at error with the stack for a fault', () => {
    const { logged, log } = lines();
    const started = process.hrtime.bigint();
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
