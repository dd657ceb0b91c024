import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DriftReport, WorkloadDrift } from '../../src/drift/drift.js';
import { restartPlan, restartWorkloads, rolloutStatus, wontRoll, type WorkloadApi } from '../../src/drift/restart.js';
import { restartPatch, type Workload, type WorkloadKey } from '../../src/kube/workloads.js';

const workload = (kind: string, name: string, stale: number, missing: number, reason = 'sidecars-changed', templateOptsIn = true): WorkloadDrift => ({
  namespace: 'shop',
  kind,
  name,
  templateOptsIn,
  pods: Array.from({ length: stale + missing }, (_, i) => ({
    name: `${name}-${i}`,
    state: i < stale ? 'stale' : 'missing',
    reason: i < stale ? (reason as 'sidecars-changed') : 'not-injected',
  })),
  injected: stale,
  stale,
  missing,
  rollout: `kubectl -n shop ... ${kind}/${name}`,
});

const report = (workloads: WorkloadDrift[]): DriftReport => ({
  templates: { source: 'x', digest: 'd' },
  webhooks: { source: 'w' },
  injected: 0,
  stale: 0,
  missing: 0,
  namespaces: [],
  workloads,
});

const dep = (name: string): WorkloadKey => ({ namespace: 'shop', kind: 'Deployment', name });

describe('drift --restart', () => {
  it('sends the patch kubectl rollout restart sends: the template restartedAt annotation, RFC 3339 in seconds', () => {
    assert.deepEqual(restartPatch(new Date('2026-11-28T02:15:00.123Z')), {
      spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-28T02:15:00Z' } } } },
    });
  });

  it('plans the Deployments, StatefulSets and DaemonSets of stale and missing pods; never bare pods or Jobs', () => {
    const plan = restartPlan(
      report([
        workload('CronJob', 'nightly', 1, 0),
        workload('DaemonSet', 'agent', 0, 2),
        workload('Deployment', 'web', 1, 1),
        workload('Deployment', 'current', 0, 0),
        workload('Job', 'migrate', 0, 1),
        workload('Pod', 'debug', 1, 0),
        workload('StatefulSet', 'db', 1, 0, 'would-be-refused'),
        workload('StatefulSet', 'ledger', 2, 0),
        workload('Deployment', 'not-opted-in', 1, 0, 'sidecars-changed', false),
      ]),
      2,
    );
    assert.deepEqual(
      plan.restart.map((w) => `${w.kind}/${w.name}`),
      ['DaemonSet/agent', 'Deployment/web'],
    );
    assert.deepEqual(
      plan.untouched.map((u) => [`${u.workload.kind}/${u.workload.name}`, u.why.replace(/:.*/, '')]),
      [
        ['CronJob/nightly', 'never restarted by drift'],
        ['Job/migrate', 'never restarted by drift'],
        ['Pod/debug', 'never restarted by drift'],
        ['StatefulSet/db', 'the templates would refuse its pods now'],
        ['StatefulSet/ledger', 'over --max-workloads 2'],
        ['Deployment/not-opted-in', 'its pod template does not opt in to injection'],
      ],
    );
  });

  it("reads a Deployment's rollout as kubectl rollout status does", () => {
    const d = (generation: number, status: object, replicas = 3): Workload =>
      ({ metadata: { generation }, spec: { replicas, selector: {}, template: {} }, status }) as Workload;
    const complete = { replicas: 3, updatedReplicas: 3, availableReplicas: 3 };
    // Right after the patch the old status is complete, but of the generation before: not done.
    assert.equal(rolloutStatus(dep('web'), d(2, { ...complete, observedGeneration: 1 })).done, false);
    assert.deepEqual(rolloutStatus(dep('web'), d(2, { observedGeneration: 2, replicas: 4, updatedReplicas: 1, availableReplicas: 3 })), {
      done: false,
      message: '1 out of 3 new replicas have been updated',
    });
    assert.equal(
      rolloutStatus(dep('web'), d(2, { observedGeneration: 2, replicas: 4, updatedReplicas: 3, availableReplicas: 3 })).message,
      '1 old replicas are pending termination',
    );
    assert.equal(
      rolloutStatus(dep('web'), d(2, { observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 2 })).message,
      '2 of 3 updated replicas are available',
    );
    assert.deepEqual(rolloutStatus(dep('web'), d(2, { ...complete, observedGeneration: 2 })), { done: true, message: 'successfully rolled out' });
    const deadline = d(2, {
      observedGeneration: 2,
      replicas: 4,
      updatedReplicas: 1,
      conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded' }],
    });
    assert.equal(rolloutStatus(dep('web'), deadline).failed, 'deployment "web" exceeded its progress deadline');
  });

  it("reads a StatefulSet's and a DaemonSet's rollout as kubectl rollout status does", () => {
    const sts: WorkloadKey = { namespace: 'shop', kind: 'StatefulSet', name: 'db' };
    const s = (status: object, partition?: number): Workload =>
      ({
        metadata: { generation: 2 },
        spec: { replicas: 3, ...(partition !== undefined && { updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition } } }) },
        status,
      }) as Workload;
    assert.equal(rolloutStatus(sts, s({ observedGeneration: 1, readyReplicas: 3, currentRevision: 'a', updateRevision: 'a' })).done, false);
    assert.equal(rolloutStatus(sts, s({ observedGeneration: 2, readyReplicas: 3, currentRevision: 'a', updateRevision: 'b', updatedReplicas: 1 })).done, false);
    assert.equal(rolloutStatus(sts, s({ observedGeneration: 2, readyReplicas: 2, currentRevision: 'b', updateRevision: 'b' })).done, false);
    assert.equal(rolloutStatus(sts, s({ observedGeneration: 2, readyReplicas: 3, currentRevision: 'b', updateRevision: 'b' })).done, true);
    // A partition: only the pods at or above it are updated, and the revisions stay apart.
    assert.equal(
      rolloutStatus(sts, s({ observedGeneration: 2, readyReplicas: 3, currentRevision: 'a', updateRevision: 'b', updatedReplicas: 1 }, 2)).done,
      true,
    );
    const ds: WorkloadKey = { namespace: 'shop', kind: 'DaemonSet', name: 'agent' };
    const d = (status: object): Workload => ({ metadata: { generation: 2 }, spec: {}, status }) as Workload;
    assert.equal(
      rolloutStatus(ds, d({ observedGeneration: 2, desiredNumberScheduled: 3, updatedNumberScheduled: 2, numberAvailable: 3 })).message,
      '2 out of 3 new pods have been updated',
    );
    assert.equal(
      rolloutStatus(ds, d({ observedGeneration: 2, desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 2 })).message,
      '2 of 3 updated pods are available',
    );
    assert.equal(rolloutStatus(ds, d({ observedGeneration: 2, desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 3 })).done, true);
  });

  it('does not patch a paused Deployment or an OnDelete StatefulSet: a restart would not replace their pods', () => {
    assert.match(wontRoll(dep('web'), { spec: { paused: true } } as Workload) ?? '', /paused/);
    assert.match(
      wontRoll({ namespace: 'shop', kind: 'StatefulSet', name: 'db' }, { spec: { updateStrategy: { type: 'OnDelete' } } } as Workload) ?? '',
      /OnDelete/,
    );
    assert.equal(wontRoll(dep('web'), { spec: {} } as Workload), undefined);
  });

  it('rolls one workload at a time, each to its end, and stops at the first that fails', async () => {
    const log: string[] = [];
    // Each workload is done on the second read after its patch; `bad` exceeds its progress deadline.
    const reads = new Map<string, number>();
    const api: WorkloadApi = {
      read: async (w) => {
        const n = (reads.get(w.name) ?? -1) + 1;
        reads.set(w.name, n);
        log.push(`get ${w.name}`);
        const generation = n === 0 ? 1 : 2;
        const conditions = w.name === 'bad' && n > 0 ? [{ type: 'Progressing', reason: 'ProgressDeadlineExceeded' }] : [];
        const updated = n >= 2 ? 2 : 1;
        return {
          metadata: { generation },
          spec: { replicas: 2 },
          status: { observedGeneration: generation, replicas: 2, updatedReplicas: updated, availableReplicas: updated, conditions },
        } as Workload;
      },
      restart: async (w) => {
        log.push(`patch ${w.name}`);
        return {} as Workload;
      },
    };
    const plan = restartPlan(report([workload('Deployment', 'a', 1, 0), workload('Deployment', 'bad', 0, 1), workload('Deployment', 'c', 1, 0)]), 10);
    const said: string[] = [];
    const results = await restartWorkloads(plan, api, { timeoutMs: 5000, pollMs: 1, say: (l) => void said.push(l) });
    assert.deepEqual(log, ['get a', 'patch a', 'get a', 'get a', 'get bad', 'patch bad', 'get bad']);
    assert.deepEqual(
      results.map((r) => `${r.name}:${r.outcome}`),
      ['a:restarted', 'bad:failed', 'c:not-started'],
    );
    assert.ok(said.includes('shop Deployment/bad: failed: deployment "bad" exceeded its progress deadline'), said.join('\n'));
  });

  it('stops when a rollout outlasts --timeout', async () => {
    const api: WorkloadApi = {
      read: async () =>
        ({
          metadata: { generation: 2 },
          spec: { replicas: 2 },
          status: { observedGeneration: 2, replicas: 3, updatedReplicas: 1, availableReplicas: 2 },
        }) as Workload,
      restart: async () => ({}) as Workload,
    };
    const plan = restartPlan(report([workload('Deployment', 'slow', 1, 0), workload('Deployment', 'next', 1, 0)]), 10);
    const started = Date.now();
    const results = await restartWorkloads(plan, api, { timeoutMs: 100, pollMs: 10, say: () => {} });
    assert.ok(Date.now() - started < 2000);
    assert.deepEqual(
      results.map((r) => `${r.name}:${r.outcome}`),
      ['slow:timed-out', 'next:not-started'],
    );
    assert.match(results[0]!.detail, /^not rolled out after 0.1s \(--timeout\): 1 out of 2 new replicas have been updated$/);
  });
});
