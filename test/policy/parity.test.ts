import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { admissionView } from '../corpus/admission-view.js';
import { PodsDir, readYaml11 } from '../corpus/corpus.js';
import { admit, assertParity, INJECT, pods, SELECTIONS, skip, startModes, stored, type Admission, type Modes, type Obj } from '../helpers/policy-parity.js';

describe('policy mode stores the pods webhook mode stores (kubeadmit)', { skip, concurrency: 2 }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('templates');
  });
  after(async () => modes?.close());
  const both = (scenario: Obj): Promise<[Admission, Admission]> =>
    Promise.all([admit(modes, modes.webhooks, scenario), admit(modes, modes.policies, scenario)]);

  for (const { name, manifest } of pods()) {
    it(`${name}: the same pod for each selection of the bundled templates`, () => assertParity(modes, name, manifest, SELECTIONS));
  }

  it('a pod of an opted-in namespace without the label gets the same sidecars; one labelled "no" gets none in either mode', async () => {
    const pod = (labels: Obj): Obj => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'web-7d9f8b6c5-', labels },
      spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] },
    });
    for (const labels of [{}, { [INJECT]: 'true' }, { [INJECT]: 'no' }, { [INJECT]: 'false' }]) {
      const [webhook, policy] = await both({ namespace: 'shop', namespaces: { shop: { labels: { [INJECT]: 'true' } } }, object: pod(labels) });
      assert.equal(webhook.allowed && policy.allowed, true);
      assert.deepEqual(stored(policy), stored(webhook), JSON.stringify(labels));
    }
    for (const namespace of ['kube-system', 'sidecar-injector']) {
      const [webhook, policy] = await both({ namespace, namespaces: { [namespace]: { labels: { [INJECT]: 'true' } } }, object: pod({ [INJECT]: 'true' }) });
      assert.deepEqual(stored(policy), stored(webhook), namespace);
      assert.equal(policy.object?.['spec']?.['containers']?.length, 1, `${namespace} is never injected`);
    }
  });

  it('reinvocation and a pod that already has its sidecars change nothing more', async () => {
    const view = admissionView(readYaml11('examples/deployment.yaml')[0]!, ['log-shipper', 'proxy'], 'shop');
    const first = await admit(modes, modes.policies, { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: view.pod });
    assert.equal(first.allowed, true, first.reason);
    const again = structuredClone(first.object!);
    delete again['metadata']['name'];
    const interloper = [{ patch: [{ op: 'add', path: '/metadata/labels/touched', value: 'yes' }] }];
    const second = await admit(modes, modes.policies, { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: again, interlopers: interloper });
    assert.equal(second.allowed, true, second.reason);
    const expected = structuredClone(again);
    expected['metadata']['labels']['touched'] = 'yes';
    assert.deepEqual(stored(second), stored({ ...second, object: expected }));
  });

  it('the validating policy refuses what /validate refuses: an opted-in pod without its sidecars, an unknown template', async () => {
    const cases: [string, Obj][] = [];
    for (const selection of SELECTIONS)
      cases.push([`without ${selection.join(',') || 'the defaults'}`, admissionView(readYaml11('examples/deployment.yaml')[0]!, selection, 'shop').pod]);
    const job = readdirSync(PodsDir).find((f) => f === 'istio-job.yaml')!;
    cases.push(['a Job pod without its native sidecar', admissionView(readYaml11(join(PodsDir, job))[0]!, ['log-shipper'], 'shop').pod]);
    cases.push(['an unknown template', admissionView(readYaml11('examples/pod.yaml')[0]!, ['log-shiper'], 'shop').pod]);
    for (const [what, pod] of cases) {
      const scenario = { namespace: 'shop', namespaces: { shop: { labels: {} } }, object: pod };
      const [webhook, policy] = await Promise.all([admit(modes, modes.validatingWebhook, scenario), admit(modes, modes.validatingPolicy, scenario)]);
      assert.equal(webhook.allowed, false, `${what}: /validate refuses`);
      assert.equal(policy.allowed, false, `${what}: the validating policy refuses`);
      assert.match(
        policy.reason ?? '',
        /ValidatingAdmissionPolicy 'sidecar-injector-validate' with binding 'sidecar-injector-validate-pod' denied request: (pod opted in to sidecar injection but is missing: |unknown sidecar template)/,
        what,
      );
    }
    // And what the mutating policies stored passes it, as what /mutate stored passes /validate (the parity cases above ran both).
  });
});
