import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admissionView } from '../corpus/admission-view.js';
import { readYaml11 } from '../corpus/corpus.js';
import { assertParity, assertSame, INJECT, pods, scenarioOf, skip, startModes, type Modes, type Obj } from '../helpers/policy-parity.js';

const TOKEN_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';
const TEMPLATES = 'sidecar-injector.io/templates';

/** serviceAccountToken: true (test/fixtures/policy/token): the sidecars mount the pod's own token volume, found per pod by its mount. */
describe("policy mode stores the pods webhook mode stores, with the pod's own ServiceAccount token (kubeadmit)", { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('test/fixtures/policy/token');
  });
  after(async () => modes?.close());
  const selections = [['vault'], ['exporter'], ['exporter', 'vault']];

  for (const { name, manifest } of pods().filter((_, i) => i % 3 === 0)) {
    it(`${name}: the same pod for each selection`, () => assertParity(modes, name, manifest, selections));
  }

  it("mounts the pod's token volume, whatever its name, into the template's containers but one that mounts its own", async () => {
    const view = admissionView(readYaml11('examples/deployment.yaml')[0]!, ['exporter', 'vault'], 'shop');
    const scenario = { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: view.pod };
    const [webhook] = await assertSame(modes, 'examples/deployment.yaml', scenario, true);
    const token = (view.pod['spec']['volumes'] as Obj[]).find((v) => String(v['name']).startsWith('kube-api-access-'))!['name'];
    const mounts = (c: Obj): string[] => (c['volumeMounts'] ?? []).filter((m: Obj) => m['mountPath'] === TOKEN_PATH).map((m: Obj) => m['name']);
    const spec = webhook.object!['spec'];
    const byName = new Map<string, Obj>([...(spec['initContainers'] ?? []), ...spec['containers']].map((c: Obj) => [c['name'], c]));
    assert.deepEqual(
      ['vault-init', 'vault', 'exporter', 'pinned'].map((n) => mounts(byName.get(n)!)),
      [[token], [token], [token], ['pinned-token']],
    );
  });

  it('a pod that mounts no token gets no mount in either mode', async () => {
    await assertSame(modes, 'no token', scenarioOf('shop', { [INJECT]: 'true' }, { [TEMPLATES]: 'vault,exporter' }), true);
  });
});
