import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InjectorError } from '../../src/errors.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import { optedInPod } from '../helpers/review.js';

const set = compileTemplateSet(
  [
    {
      file: 'uses-pod-volume.yaml',
      text: `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: uses-pod-volume
spec:
  default: true
  containers:
    - name: reader
      image: busybox:1.36
      volumeMounts:
        - { name: shared-data, mountPath: /data, readOnly: true }
`,
    },
  ],
  'test',
);
const templates = [...set.templates.values()];

describe('injectSidecars', () => {
  it('mounts a volume the pod brings', () => {
    const pod = optedInPod({ spec: { containers: [{ name: 'app', image: 'app' }], volumes: [{ name: 'shared-data', emptyDir: {} }] } });
    const { pod: out } = injectSidecars(pod, templates, 'ns');
    assert.deepEqual(out.spec!.containers!.map((c) => c.name), ['app', 'reader']);
  });

  it('refuses, naming the template, a mount of a volume that neither the template nor the pod defines', () => {
    const pod = optedInPod();
    assert.throws(
      () => injectSidecars(pod, templates, 'ns'),
      (err: unknown) => err instanceof InjectorError && err.code === 'TEMPLATE_VOLUME_MISSING' && /"shared-data" \(container "reader" of template "uses-pod-volume"\)/.test(err.message),
    );
  });
});
