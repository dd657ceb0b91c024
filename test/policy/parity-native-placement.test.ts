import { after, before, describe, it } from 'node:test';
import { assertParity, skip, startModes, type Modes, type Obj } from '../helpers/policy-parity.js';

/** Native sidecars next to a named init container, beside native sidecars placed first (test/fixtures/policy/native-placement/), in Jobs' pods too. */
describe('policy mode stores the pods webhook mode stores, with native sidecars next to an init container (kubeadmit)', { skip }, () => {
  let modes: Modes;
  before(async () => {
    modes = await startModes('test/fixtures/policy/native-placement');
  });
  after(async () => modes?.close());
  const pod = (init: readonly string[], job: boolean): Obj => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'web-0',
      labels: { app: 'web' },
      ...(job && { ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'backup', uid: '6f1c9a50-0c43-4a52-9e2f-3a1d0a4a7d11', controller: true }] }),
    },
    spec: {
      ...(job && { restartPolicy: 'Never' }),
      ...(init.length > 0 && { initContainers: init.map((name) => ({ name, image: 'busybox:1.36' })) }),
      containers: [{ name: 'app', image: 'nginx:1.27' }],
    },
  });
  const selections = [['vault'], ['log'], ['vault', 'log'], ['log', 'vault'], ['mesh', 'vault'], ['vault', 'mesh', 'log'], ['log', 'mesh', 'vault']];
  for (const init of [[], ['migrate'], ['setup', 'migrate']]) {
    for (const job of [false, true]) {
      const what = `init containers [${init.join(', ')}]${job ? ", a Job's pod" : ''}`;
      it(what, () => assertParity(modes, what, pod(init, job), selections));
    }
  }
});
