import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { HOME, sct, eventually } from '../helpers/sidecartemplates.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { httpsRequest } from '../helpers/client.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';
import { startClusterTestServer, startTestServer, type TestServer } from '../helpers/server.js';
import { createKubeClients } from '../../src/kube/client.js';
import { openClusterTemplateStore } from '../../src/kube/sidecartemplates.js';
import { createLogger } from '../../src/log.js';

describe('SidecarTemplate objects through the API server (issue 23)', () => {
  let api: FakeApiServer;
  let server: TestServer;

  /** The images /mutate injects into an opted-in pod of `namespace` naming `templates` (none: the defaults). */
  const injected = async (namespace: string, templates?: string): Promise<string[] | string> => {
    const pod = optedInPod(templates === undefined ? {} : { annotations: { 'sidecar-injector.io/templates': templates } });
    const res = await httpsRequest(`${server.url}/mutate`, JSON.stringify(podReview(pod, { namespace })), { ca: server.certs.ca.certPem });
    const response = res.json().response;
    if (!response.allowed) return `denied: ${response.status?.message}`;
    return decodePatch(response)
      .filter((op: any) => op.op === 'add' && /^\/spec\/containers\/-?\d*$/.test(op.path))
      .map((op: any) => op.value.image)
      .sort();
  };
  const ready = async (): Promise<number> => (await fetch(`${server.healthUrl}/readyz`)).status;

  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct(HOME, 'proxy', 'registry.example.com/proxy:1', { default: true }));
    api.applyTemplate(sct(HOME, 'logger', 'registry.example.com/logger:1'));
    server = await startClusterTestServer(api);
  });
  after(async () => {
    await server?.close();
    await api?.close();
  });

  it('serves the templates of the injector namespace to every namespace, after listing them', async () => {
    assert.ok(api.calls.some((c) => c.method === 'GET' && c.path === '/apis/sidecar-injector.io/v1alpha1/sidecartemplates'));
    assert.deepEqual(await injected('team-a'), ['registry.example.com/proxy:1']);
    assert.deepEqual(await injected('team-b', 'logger'), ['registry.example.com/logger:1']);
  });

  it("applies a team's template to its namespace only, shadowing the cluster-wide one of the same name there", async () => {
    api.applyTemplate(sct('team-a', 'logger', 'registry.example.com/team-a-logger:1'));
    await eventually(
      async () => JSON.stringify(await injected('team-a', 'logger')) === JSON.stringify(['registry.example.com/team-a-logger:1']),
      'team-a sees its logger',
    );
    assert.deepEqual(await injected('team-b', 'logger'), ['registry.example.com/logger:1']);
  });

  it("replaces the cluster defaults with a namespace's own defaults for its pods", async () => {
    api.applyTemplate(sct('team-a', 'mesh', 'registry.example.com/mesh:1', { default: true }));
    await eventually(async () => JSON.stringify(await injected('team-a')) === JSON.stringify(['registry.example.com/mesh:1']), 'team-a defaults');
    assert.deepEqual(await injected('team-b'), ['registry.example.com/proxy:1']);
  });

  it('serves a changed template within seconds, and removes a deleted one', async () => {
    api.applyTemplate(sct('team-a', 'logger', 'registry.example.com/team-a-logger:2'));
    await eventually(async () => JSON.stringify(await injected('team-a', 'logger')) === JSON.stringify(['registry.example.com/team-a-logger:2']), 'the change');
    api.deleteTemplate('team-a', 'logger');
    await eventually(
      async () => JSON.stringify(await injected('team-a', 'logger')) === JSON.stringify(['registry.example.com/logger:1']),
      'the cluster-wide logger back in team-a',
    );
    api.deleteTemplate('team-a', 'mesh');
    await eventually(
      async () => JSON.stringify(await injected('team-a')) === JSON.stringify(['registry.example.com/proxy:1']),
      'the cluster defaults back in team-a',
    );
  });

  it('keeps serving the last valid version of a template whose change is invalid, and says why in its status', async () => {
    api.applyTemplate(sct('team-c', 'agent', 'registry.example.com/agent:1'));
    await eventually(async () => JSON.stringify(await injected('team-c', 'agent')) === JSON.stringify(['registry.example.com/agent:1']), 'agent v1');
    await eventually(async () => api.template('team-c', 'agent').status?.conditions?.[0]?.status === 'True', 'Loaded=True');
    const broken = sct('team-c', 'agent', 'registry.example.com/agent:2');
    broken.spec.containers[0].imagePullPolicy = 'Sometimes';
    api.applyTemplate(broken);
    await eventually(async () => api.template('team-c', 'agent').status?.conditions?.[0]?.status === 'False', 'Loaded=False');
    const condition = api.template('team-c', 'agent').status.conditions[0];
    assert.equal(condition.reason, 'Invalid');
    assert.equal(api.template('team-c', 'agent').status.observedGeneration, 2);
    assert.match(condition.message, /^not served \(the last valid version, if any, still is\): template "agent": \/spec\/containers\/0\/imagePullPolicy: /);
    assert.deepEqual(await injected('team-c', 'agent'), ['registry.example.com/agent:1']);
    // A new template that is invalid from the start is never served.
    const bad = sct('team-c', 'typo', 'registry.example.com/typo:1');
    bad.spec.contaners = bad.spec.containers;
    api.applyTemplate(bad);
    await eventually(async () => api.template('team-c', 'typo').status?.conditions?.[0]?.status === 'False', 'typo Loaded=False');
    assert.match(String(await injected('team-c', 'typo')), /denied: .*"typo"/);
  });

  it('serves the older of two conflicting default templates of a namespace, and keeps the last valid version of one edited into a conflict', async () => {
    const meshOf = (name: string, container: string, image: string): any => ({
      ...sct('team-f', name, image, { default: true }),
      spec: { default: true, containers: [{ name: container, image }] },
    });
    // Created first though named last: the older object wins, whatever the names.
    api.applyTemplate(meshOf('zeta', 'mesh', 'registry.example.com/zeta:1'));
    await eventually(async () => JSON.stringify(await injected('team-f')) === JSON.stringify(['registry.example.com/zeta:1']), 'zeta served');
    api.applyTemplate(meshOf('alpha', 'mesh', 'registry.example.com/alpha:1'));
    await eventually(async () => api.template('team-f', 'alpha').status?.conditions?.[0]?.status === 'False', 'alpha Loaded=False');
    assert.match(api.template('team-f', 'alpha').status.conditions[0].message, /container "mesh".*both are default templates of namespace team-f/);
    assert.deepEqual(await injected('team-f'), ['registry.example.com/zeta:1']);
    // A third default that fits is served beside zeta; an edit that makes it clash keeps its last valid version.
    api.applyTemplate(meshOf('gamma', 'gamma', 'registry.example.com/gamma:1'));
    await eventually(
      async () => JSON.stringify(await injected('team-f')) === JSON.stringify(['registry.example.com/gamma:1', 'registry.example.com/zeta:1']),
      'gamma beside zeta',
    );
    api.applyTemplate(meshOf('gamma', 'mesh', 'registry.example.com/gamma:2'));
    await eventually(async () => api.template('team-f', 'gamma').status?.conditions?.[0]?.status === 'False', 'gamma Loaded=False');
    assert.deepEqual(await injected('team-f'), ['registry.example.com/gamma:1', 'registry.example.com/zeta:1']);
    // Deleting the older one lets the refused one in.
    api.deleteTemplate('team-f', 'zeta');
    await eventually(async () => api.template('team-f', 'alpha').status?.conditions?.[0]?.status === 'True', 'alpha Loaded=True once zeta is gone');
  });

  it("writes an object's status once per generation, even when another replica writes a different one", async () => {
    api.applyTemplate(sct('team-g', 'agent', 'registry.example.com/agent-g:1'));
    await eventually(async () => api.template('team-g', 'agent').status?.conditions?.[0]?.status === 'True', 'Loaded=True');
    const writes = (): number => api.calls.filter((c) => c.method === 'PUT' && c.path.endsWith('/namespaces/team-g/sidecartemplates/agent/status')).length;
    const before = writes();
    // A replica that judged otherwise (it remembers another last valid version) writes its own view.
    api.writeTemplateStatus('team-g', 'agent', {
      observedGeneration: 1,
      conditions: [
        { type: 'Loaded', status: 'False', reason: 'Invalid', message: 'another replica', observedGeneration: 1, lastTransitionTime: '2026-01-01T00:00:00Z' },
      ],
    });
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(writes(), before, 'no second write: two replicas that disagree must not overwrite each other forever');
    // A new generation is written again.
    api.applyTemplate(sct('team-g', 'agent', 'registry.example.com/agent-g:2'));
    await eventually(async () => api.template('team-g', 'agent').status?.observedGeneration === 2, 'generation 2 observed');
  });

  it('writes the status again against the latest object when a label change landed meanwhile (409 Conflict)', async () => {
    let changed = 0;
    api.beforeStatusWrite = (namespace) => {
      if (namespace !== 'team-h' || changed++ > 0) return;
      // Another client (kubectl label) writes first: the injector's PUT carries a stale resourceVersion.
      const current = api.template('team-h', 'agent');
      api.applyTemplate({ ...current, metadata: { ...current.metadata, labels: { team: 'h' } } });
    };
    try {
      api.applyTemplate(sct('team-h', 'agent', 'registry.example.com/agent-h:1'));
      await eventually(async () => api.template('team-h', 'agent').status?.conditions?.[0]?.status === 'True', 'Loaded=True after the conflict');
      assert.equal(
        api.calls.filter((c) => c.method === 'PUT' && c.status === 409 && c.path.endsWith('/namespaces/team-h/sidecartemplates/agent/status')).length,
        1,
      );
      assert.equal(api.template('team-h', 'agent').metadata.labels.team, 'h', 'the label change stands');
    } finally {
      api.beforeStatusWrite = undefined;
    }
  });

  it('records the namespace and version of each template in the status annotation', async () => {
    api.applyTemplate(sct('team-d', 'agent', 'registry.example.com/agent-d:1'));
    await eventually(async () => JSON.stringify(await injected('team-d', 'agent')) === JSON.stringify(['registry.example.com/agent-d:1']), 'team-d agent');
    const res = await httpsRequest(
      `${server.url}/mutate`,
      JSON.stringify(podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'agent,logger' } }), { namespace: 'team-d' })),
      { ca: server.certs.ca.certPem },
    );
    const status =
      decodePatch(res.json().response).find((op: any) => op.path === '/metadata/annotations/sidecar-injector.io~1status')?.value ??
      decodePatch(res.json().response).find((op: any) => op.path === '/metadata/annotations')?.value['sidecar-injector.io/status'];
    const injectedList = JSON.parse(status).injected;
    assert.deepEqual(
      injectedList.map((r: any) => [r.template, r.namespace]),
      [
        ['agent', 'team-d'],
        ['logger', HOME],
      ],
    );
    assert.ok(injectedList.every((r: any) => typeof r.version === 'string' && r.version.length > 0));
  });

  it('follows bookmarks, and lists again after 410 Gone', async () => {
    api.bookmark();
    api.compact();
    api.endWatches(); // the informer watches again from its resourceVersion, now compacted: 410, then a list
    const lists = (): number => api.calls.filter((c) => c.method === 'GET' && c.path === '/apis/sidecar-injector.io/v1alpha1/sidecartemplates').length;
    const before = lists();
    await eventually(async () => lists() > before, 'a new list after 410');
    api.applyTemplate(sct('team-e', 'agent', 'registry.example.com/agent-e:1'));
    await eventually(
      async () => JSON.stringify(await injected('team-e', 'agent')) === JSON.stringify(['registry.example.com/agent-e:1']),
      'a change after the re-list',
    );
  });

  it('keeps the last set when the API server is unreachable', async () => {
    api.forbid('/apis/sidecar-injector.io/v1alpha1/sidecartemplates');
    api.endWatches();
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(await injected('team-e', 'agent'), ['registry.example.com/agent-e:1']);
    assert.equal(await ready(), 200);
  });
});

describe('readiness with --templates-source cluster', () => {
  it('says what to fix when the API refuses the list (no RBAC), and retries', async () => {
    const api = await startFakeApiServer();
    api.forbid('/apis/sidecar-injector.io/v1alpha1/sidecartemplates');
    const lines: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void lines.push(line) });
    const store = openClusterTemplateStore(createKubeClients({ kubeconfig: api.kubeconfig, namespace: HOME }), { logger, retryMs: 50 });
    try {
      await eventually(async () => lines.filter((l) => l.includes('watching sidecartemplates failed')).length >= 2, 'two attempts');
      assert.match(
        lines.find((l) => l.includes('watching sidecartemplates failed'))!,
        /403: the injector's ServiceAccount may not get, list and watch sidecartemplates/,
      );
      assert.equal(store.synced(), false);
    } finally {
      await store.close();
      await api.close();
    }
  });

  it('is not ready until the first list of sidecartemplates', async () => {
    const api = await startFakeApiServer();
    api.forbid('/apis/sidecar-injector.io/v1alpha1/sidecartemplates');
    const server = await startTestServer(['--templates-source', 'cluster', '--kubeconfig', api.kubeconfig, '--namespace', HOME]);
    try {
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await fetch(`${server.healthUrl}/readyz`)).status, 503);
    } finally {
      await server.close();
      await api.close();
    }
  });
  it('reads every page again when a list breaks off after its first page, and serves the objects of the later pages', async () => {
    const api = await startFakeApiServer();
    // Three pages of the store's list (10 objects a page); the second page fails once.
    for (let i = 0; i < 25; i++) api.applyTemplate(sct(`team-${String(i).padStart(2, '0')}`, 'agent', `registry.example/agent:${i}`, { default: true }));
    api.failContinuedLists = 1;
    const logger = createLogger('silent');
    const store = openClusterTemplateStore(createKubeClients({ kubeconfig: api.kubeconfig, namespace: HOME }), { logger, retryMs: 50 });
    try {
      await eventually(async () => store.synced(), 'the first full list');
      await eventually(async () => store.current().namespaces?.get('team-24')?.templates.get('agent') !== undefined, 'an object of the last page served');
    } finally {
      await store.close();
      await api.close();
    }
  });
});
