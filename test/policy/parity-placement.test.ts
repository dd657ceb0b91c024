import { after, before, describe, it } from 'node:test';
import { assertParity, skip, startModes, type Modes, type Obj } from '../helpers/policy-parity.js';

/** Placement next to a named container, placeholders of every kind (test/fixtures/policy/placement/). */
describe('policy mode stores the pods webhook mode stores, with placement before and after a container (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('test/fixtures/policy/placement');
  });
  after(async () => modes?.close());
  const pod = (containers: readonly string[]): Obj => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-0', labels: { app: 'web' } },
    spec: { serviceAccountName: 'builder', containers: containers.map((name) => ({ name, image: 'nginx:1.27' })) },
  });
  const selections = [[], ['ahead'], ['ahead', 'behind', 'tail'], ['tail', 'behind', 'ahead'], ['behind', 'ahead']];
  for (const containers of [['app'], ['init', 'app', 'exporter'], ['worker']]) {
    it(`a pod with containers ${containers.join(', ')}`, () => assertParity(modes, containers.join(','), pod(containers), selections));
  }
});
