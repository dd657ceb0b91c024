import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { base64Patch } from '../../src/admission/codec.js';
import { errorRecord, logReviews, reviewOutcome, reviewRecord } from '../../src/admission/record.js';
import { denied, injected, passed } from '../../src/admission/verdict.js';
import { InjectorError } from '../../src/errors.js';
import { createLogger, LOG_FIELD_MAX } from '../../src/log.js';

function lines(): { readonly logged: any[]; readonly log: ReturnType<typeof logReviews> } {
  const logged: any[] = [];
  return { logged, log: logReviews(createLogger('info', { write: (line: string) => void logged.push(JSON.parse(line)) })) };
}

describe('the review record', () => {
  it('takes the facts of the request, clipped: namespace and name fall back to the pod, then to generateName', () => {
    const long = 'x'.repeat(1000);
    const outcome = reviewOutcome(
      { operation: long, object: { metadata: { generateName: 'web-', namespace: 'from-pod' } } },
      passed('skipped', 'not-opted-in'),
    );
    assert.deepEqual([outcome.namespace, outcome.pod], ['from-pod', 'web-']);
    assert.ok(outcome.operation.length <= LOG_FIELD_MAX + 32 && outcome.operation.endsWith('more)'));
    const named = reviewOutcome(
      { namespace: 'shop', name: 'req-name', object: { metadata: { name: { not: 'a string' } } } },
      passed('skipped', 'not-opted-in'),
    );
    assert.deepEqual([named.namespace, named.pod], ['shop', 'req-name']);
  });

  it('is logged as one line, with the field names of the log line', () => {
    const { logged, log } = lines();
    const outcome = reviewOutcome({ operation: 'CREATE', namespace: 'shop', object: { metadata: { name: 'web' } } }, passed('skipped', 'not-opted-in'));
    log(reviewRecord('/mutate', 'u-1', outcome, true, performance.now()));
    assert.equal(logged.length, 1);
    const { level, msg, endpoint, uid, operation, namespace, pod, decision, reason, templates, patchOps, cached, durationMs } = logged[0];
    assert.deepEqual(
      { level, msg, endpoint, uid, operation, namespace, pod, decision, reason, templates, patchOps, cached },
      {
        level: 30,
        msg: 'review',
        endpoint: '/mutate',
        uid: 'u-1',
        operation: 'CREATE',
        namespace: 'shop',
        pod: 'web',
        decision: 'skipped',
        reason: 'not-opted-in',
        templates: [],
        patchOps: 0,
        cached: true,
      },
    );
    assert.equal(typeof durationMs, 'number');
    // Flat values only, in this order: never a whole object (the pod, a template) at info level.
    assert.deepEqual(Object.keys(logged[0]), [
      'level',
      'time',
      'name',
      'endpoint',
      'uid',
      'operation',
      'namespace',
      'pod',
      'decision',
      'reason',
      'templates',
      'patchOps',
      'cached',
      'durationMs',
      'msg',
    ]);
  });

  it("is pino's own line: the logger's options shape it (redact, mixin, a child's bindings)", () => {
    const written: string[] = [];
    const logger = pino({ redact: ['uid'], mixin: () => ({ cluster: 'east' }) }, { write: (line: string) => void written.push(line) }).child({ team: 'a' });
    logReviews(logger)(
      reviewRecord(
        '/mutate',
        'u-1',
        reviewOutcome({ operation: 'CREATE', namespace: 'shop', object: { metadata: { name: 'web' } } }, passed('skipped', 'not-opted-in')),
        true,
        performance.now(),
      ),
    );
    const line = JSON.parse(written[0]!);
    assert.deepEqual([line.msg, line.team, line.cluster, line.uid, line.pod, line.decision], ['review', 'a', 'east', '[Redacted]', 'web', 'skipped']);
  });

  it('escapes what a request put in a field, so the line stays one JSON line', () => {
    const { logged, log } = lines();
    const outcome = reviewOutcome(
      { operation: 'CREATE', namespace: 'shop', object: { metadata: { name: 'we"b\\\n\u2028é' } } },
      injected('injected', ['log-shipper', 'a"b'], 3, base64Patch('[]'), []),
    );
    log(reviewRecord('/mutate', 'u-"1"', outcome, false, performance.now()));
    assert.deepEqual([logged[0].pod, logged[0].uid, logged[0].templates, logged[0].patchOps], ['we"b\\\n\u2028é', 'u-"1"', ['log-shipper', 'a"b'], 3]);
  });

  it('writes nothing for an answered review while info is off', () => {
    const written: string[] = [];
    const logger = createLogger('warn', { write: (line: string) => void written.push(line) });
    logReviews(logger)(reviewRecord('/mutate', 'u-1', reviewOutcome({}, passed('skipped', 'not-opted-in')), true, performance.now()));
    logger.level = 'info';
    logReviews(logger)(reviewRecord('/mutate', 'u-2', reviewOutcome({}, passed('skipped', 'not-opted-in')), true, performance.now()));
    assert.deepEqual(
      written.map((l) => JSON.parse(l).uid),
      ['u-2'],
    );
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

describe('the owner Event facts of a review outcome', () => {
  const owner = (name: string, controller = true) => ({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name, uid: 'u-1', controller });
  const request = (refs: unknown[], dryRun = false): any => ({
    operation: 'CREATE',
    namespace: 'shop',
    dryRun,
    object: { metadata: { generateName: 'web-', ownerReferences: refs } },
  });
  const refusal = () => denied(new InjectorError('TEMPLATE_UNKNOWN', ['"x"', 'a', 'b']), 'unknown-template');

  it("carries the pod's controller and the denial's message only when asked, for a reason its owner can fix", () => {
    const verdict = refusal();
    assert.equal(reviewOutcome(request([owner('web-1')]), verdict).ownerEvent, undefined, 'not asked (--owner-events=off): nothing read');
    assert.deepEqual(reviewOutcome(request([owner('web-1')]), verdict, true).ownerEvent, {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      name: 'web-1',
      uid: 'u-1',
      dryRun: false,
      message: verdict.response.status!.message,
    });
    assert.equal(reviewOutcome(request([owner('web-1')], true), verdict, true).ownerEvent?.dryRun, true);
    assert.equal(reviewOutcome(request([owner('web-1', false)]), verdict, true).ownerEvent, undefined, 'an owner that is not the controller');
    assert.equal(reviewOutcome(request([owner('web-1')]), passed('skipped', 'not-opted-in'), true).ownerEvent, undefined, 'a pod not refused');
    assert.equal(
      reviewOutcome(request([owner('web-1')]), denied(new InjectorError('TEMPLATE_UNKNOWN', ['"x"', 'a', 'b']), 'invalid-review'), true).ownerEvent,
      undefined,
      'a refusal the owner cannot fix',
    );
  });

  it('clips what it takes from the pod', () => {
    const facts = reviewOutcome(request([{ ...owner('w'.repeat(100_000)), kind: 'K'.repeat(100_000) }]), refusal(), true).ownerEvent!;
    assert.ok(facts.name.length <= LOG_FIELD_MAX + 32 && facts.kind.length <= LOG_FIELD_MAX + 32);
    assert.ok(facts.message.length <= 1024);
  });
});
