import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InjectorError } from '../../src/errors.js';
import { MetadataLimits } from '../../src/kube/types.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import { mutate, optedInPod, podReview } from '../helpers/review.js';

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
    assert.deepEqual(
      out.spec!.containers!.map((c) => c.name),
      ['app', 'reader'],
    );
  });

  it('refuses, naming the template, a mount of a volume that neither the template nor the pod defines', () => {
    const pod = optedInPod();
    assert.throws(
      () => injectSidecars(pod, templates, 'ns'),
      (err: unknown) =>
        err instanceof InjectorError &&
        err.code === 'TEMPLATE_VOLUME_MISSING' &&
        /"shared-data" \(container "reader" of template "uses-pod-volume"\)/.test(err.message),
    );
  });

  describe('application mounts of a volume the pod is to bring', () => {
    const appMounts = compileTemplateSet(
      [
        {
          file: 'app-mounts.yaml',
          text: `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: app-mounts
spec:
  default: true
  containers:
    - { name: agent, image: busybox:1.36 }
  volumeMounts:
    - { name: shared-data, mountPath: /data }
`,
        },
      ],
      'test',
    );
    const chosen = [...appMounts.templates.values()];

    it('refuses them when an application container would get the mount', () => {
      assert.throws(
        () => injectSidecars(optedInPod(), chosen, 'ns'),
        (err: unknown) =>
          err instanceof InjectorError &&
          err.code === 'TEMPLATE_VOLUME_MISSING' &&
          /"shared-data" \(application mounts of template "app-mounts"\)/.test(err.message),
      );
    });

    // Found by test/inject/mutate.model.test.ts: both pods were denied, though nothing they get names the volume.
    it('injects a pod whose only containers are the sidecars: no container gets the mount', () => {
      const pod = optedInPod({ spec: { containers: [{ name: 'agent', image: 'busybox:1.36' }] } });
      const { pod: out } = injectSidecars(pod, chosen, 'ns');
      assert.deepEqual(out.spec!.containers, pod.spec.containers);
    });

    it('injects a pod whose containers already mount something at that path', () => {
      const pod = optedInPod({
        spec: {
          containers: [{ name: 'app', image: 'app', volumeMounts: [{ name: 'cache', mountPath: '/data' }] }],
          volumes: [{ name: 'cache', emptyDir: {} }],
        },
      });
      const { pod: out } = injectSidecars(pod, chosen, 'ns');
      assert.deepEqual(
        out.spec!.containers!.map((c) => [c.name, c.volumeMounts]),
        [
          ['app', [{ name: 'cache', mountPath: '/data' }]],
          ['agent', undefined],
        ],
      );
      assert.deepEqual(out.spec!.volumes, [{ name: 'cache', emptyDir: {} }]);
    });
  });

  describe('a port both a sidecar and the pod declare (issue 21)', () => {
    const portSet = compileTemplateSet(
      [
        {
          file: 'dapr.yaml',
          text: `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: dapr
spec:
  containers:
    - name: daprd
      image: docker.io/daprio/daprd:1.14.4
      ports: [{ containerPort: 9090 }, { containerPort: 50001, protocol: UDP }]
  initContainers:
    - name: dapr-setup
      image: docker.io/daprio/daprd:1.14.4
      ports: [{ containerPort: 8080 }]
`,
        },
        {
          file: 'otel.yaml',
          text: `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: otel
spec:
  nativeSidecar: true
  containers:
    - name: otel-collector
      image: docker.io/otel/opentelemetry-collector:0.111.0
      ports: [{ containerPort: 4317 }]
`,
        },
      ],
      'test',
    );
    const dapr = [portSet.templates.get('dapr')!];
    const otel = [portSet.templates.get('otel')!];
    const podWith = (spec: object): any => optedInPod({ spec });
    const bind = /fail to bind/;

    it('warns, naming both containers, the port and the template, of a port an application container declares too', () => {
      const pod = podWith({ containers: [{ name: 'controller', image: 'tekton', ports: [{ containerPort: 9090, protocol: 'TCP' }] }] });
      const { warnings } = injectSidecars(pod, dapr, 'ns');
      assert.deepEqual(warnings, [
        'port 9090/TCP of sidecar "daprd" (template dapr) is also declared by container "controller"; one of them will fail to bind',
      ]);
    });

    it("warns of a native sidecar whose port the app declares, and of a port the pod's own native sidecar declares", () => {
      const app = podWith({ containers: [{ name: 'otel-demo-collector', image: 'collector', ports: [{ containerPort: 4317 }] }] });
      assert.match(
        injectSidecars(app, otel, 'ns').warnings.join('\n'),
        /port 4317\/TCP of sidecar "otel-collector" \(template otel\) is also declared by container "otel-demo-collector"/,
      );
      const native = podWith({
        initContainers: [{ name: 'agent', image: 'agent', restartPolicy: 'Always', ports: [{ containerPort: 4317 }] }],
        containers: [{ name: 'app', image: 'app' }],
      });
      assert.match(injectSidecars(native, otel, 'ns').warnings.join('\n'), /also declared by container "agent"/);
    });

    it('counts the other containers that declare it, in one warning per sidecar port', () => {
      const containers = ['a', 'b', 'c'].map((name) => ({ name, image: name, ports: [{ containerPort: 9090 }] }));
      assert.deepEqual(injectSidecars(podWith({ containers }), dapr, 'ns').warnings, [
        'port 9090/TCP of sidecar "daprd" (template dapr) is also declared by container "a" (and 2 more); one of them will fail to bind',
      ]);
    });

    it("does not warn of another protocol, of an init container that has exited, or of a template's own init container", () => {
      const pod = podWith({
        initContainers: [{ name: 'migrate', image: 'migrate', ports: [{ containerPort: 9090 }] }],
        containers: [{ name: 'app', image: 'app', ports: [{ containerPort: 9090, protocol: 'UDP' }, { containerPort: 50001 }, { containerPort: 8080 }] }],
      });
      assert.deepEqual(
        injectSidecars(pod, dapr, 'ns').warnings.filter((w) => bind.test(w)),
        [],
      );
    });

    it('says it in the AdmissionResponse of /mutate, which still injects the pod', () => {
      const pod = podWith({ containers: [{ name: 'controller', image: 'tekton', ports: [{ containerPort: 9090 }] }] });
      const { response } = mutate(
        podReview({ ...pod, metadata: { ...pod.metadata, annotations: { 'sidecar-injector.io/templates': 'dapr' } } }).request,
        portSet,
      );
      assert.equal(response.allowed, true);
      assert.ok(response.patch !== undefined);
      assert.ok(
        response.warnings?.some((w) => w.includes('"daprd"') && w.includes('"controller"')),
        JSON.stringify(response.warnings),
      );
    });
  });

  describe("annotations near Kubernetes' 256 KiB", () => {
    const withVolume = (annotations: Record<string, string>): any =>
      optedInPod({ annotations, spec: { containers: [{ name: 'app', image: 'app' }], volumes: [{ name: 'shared-data', emptyDir: {} }] } });
    // Keys plus values, in UTF-8 bytes: the apiserver's count (ValidateAnnotationsSize).
    const bytes = (m: Record<string, string>): number => Object.entries(m).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0);
    /** Annotations of exactly `total` bytes, mostly in characters of 3 bytes and 1 UTF-16 unit (€), the most bytes per unit. */
    const annotationsOf = (total: number, key = 'example.com/blob'): Record<string, string> => ({
      [key]: '€'.repeat(Math.floor((total - key.length) / 3)) + 'x'.repeat((total - key.length) % 3),
    });
    const statusBytes = (() => {
      const out = injectSidecars(withVolume({}), templates, 'ns').pod;
      return Buffer.byteLength('sidecar-injector.io/status') + Buffer.byteLength(out.metadata!.annotations!['sidecar-injector.io/status']!);
    })();

    it('injects a pod whose annotations still fit with the status annotation', () => {
      const own = annotationsOf(MetadataLimits.annotationBytes - statusBytes);
      assert.equal(bytes(own), MetadataLimits.annotationBytes - statusBytes);
      const { pod: out } = injectSidecars(withVolume(own), templates, 'ns');
      assert.equal(bytes(out.metadata!.annotations!), MetadataLimits.annotationBytes);
    });

    it("refuses, naming the limit and the status annotation's size, a pod the status annotation would take over it", () => {
      const own = annotationsOf(MetadataLimits.annotationBytes - statusBytes + 1);
      assert.throws(
        () => injectSidecars(withVolume(own), templates, 'ns'),
        (err: unknown) => {
          assert.ok(err instanceof InjectorError && err.code === 'ANNOTATIONS_TOO_LARGE');
          assert.ok(err.message.includes(`${MetadataLimits.annotationBytes + 1} bytes`), err.message);
          assert.ok(err.message.includes(`sidecar-injector.io/status alone takes ${statusBytes}`), err.message);
          assert.ok(err.message.includes(`limit of ${MetadataLimits.annotationBytes} bytes`), err.message);
          return true;
        },
      );
    });

    it('is denied by the mutating handler with that one-line message', () => {
      const own = annotationsOf(MetadataLimits.annotationBytes - 10);
      const { response, reason } = mutate(podReview(withVolume(own)).request, set);
      assert.equal(response.allowed, false);
      assert.equal(reason, 'annotations-too-large');
      assert.match(
        response.status?.message ?? '',
        /^the pod's annotations would take \d+ bytes once injected \(the status annotation sidecar-injector\.io\/status alone takes \d+\), over Kubernetes' limit of 262144 bytes[^\n]*$/,
      );
    });
  });
});

describe('serviceAccountToken and appContainers (issue 22)', () => {
  const TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount';
  const doc = (name: string, spec: string): string =>
    `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\nspec:\n${spec}`;
  const compile = (...docs: string[]) => [
    ...compileTemplateSet(
      docs.map((text, i) => ({ file: `t${i}.yaml`, text })),
      'test',
    ).templates.values(),
  ];
  const podToken = doc('vault', '  serviceAccountToken: true\n  containers:\n    - { name: vault-agent, image: hashicorp/vault:1.18 }\n');
  const ownToken = doc(
    'spire',
    '  serviceAccountToken: { audience: spire }\n  containers:\n    - { name: spire-agent, image: ghcr.io/spiffe/spire-agent:1.11 }\n',
  );
  const sidecar = (pod: any, name: string) => pod.spec.containers.find((c: any) => c.name === name);

  it("keeps a mount the template's container already has at the token path", () => {
    const templates = compile(
      doc(
        'vault',
        `  serviceAccountToken: true
  containers:
    - name: vault-agent
      image: hashicorp/vault:1.18
      volumeMounts: [{ name: vault-token, mountPath: ${TOKEN} }]
  volumes: [{ name: vault-token, emptyDir: {} }]
`,
      ),
    );
    const pod = optedInPod({
      spec: {
        containers: [{ name: 'app', image: 'app', volumeMounts: [{ name: 'kube-api-access-x2k9q', mountPath: TOKEN, readOnly: true }] }],
        volumes: [{ name: 'kube-api-access-x2k9q', projected: { sources: [] } }],
      },
    });
    const { pod: out } = injectSidecars(pod, templates, 'ns');
    assert.deepEqual(sidecar(out, 'vault-agent').volumeMounts, [{ name: 'vault-token', mountPath: TOKEN }]);
  });

  it("never takes another template's own token for the pod's, so a re-invocation changes nothing", () => {
    const templates = compile(podToken, ownToken);
    const pod = optedInPod({ spec: { automountServiceAccountToken: false, containers: [{ name: 'app', image: 'app' }] } });
    const once = injectSidecars(pod, templates, 'ns');
    assert.equal(sidecar(once.pod, 'vault-agent').volumeMounts, undefined);
    assert.equal(sidecar(once.pod, 'spire-agent').volumeMounts[0].mountPath, TOKEN);
    const twice = injectSidecars(once.pod, templates, 'ns');
    assert.deepEqual(twice.pod, once.pod);
  });

  it("names the template's own token volume alike in every rendering, and differently per template", () => {
    const [a] = compile(ownToken);
    const [b] = compile(ownToken.replace('name: spire', 'name: spire-2'));
    assert.equal(a!.spec.volumes[0]!.name, compile(ownToken)[0]!.spec.volumes[0]!.name);
    assert.notEqual(a!.spec.volumes[0]!.name, b!.spec.volumes[0]!.name);
  });

  it("touches no container when the app-containers annotation is empty, and warns of an include naming none of the pod's", () => {
    const templates = compile(
      doc('otel', '  appContainers: { include: [api] }\n  env: [{ name: OTEL, value: "1" }]\n  containers:\n    - { name: otel, image: otel/collector:1 }\n'),
    );
    const spec = {
      containers: [
        { name: 'app', image: 'app' },
        { name: 'api', image: 'api' },
      ],
    };
    const narrowed = injectSidecars(optedInPod({ spec, annotations: { 'sidecar-injector.io/app-containers': '' } }), templates, 'ns');
    assert.deepEqual(
      narrowed.pod.spec!.containers!.map((c) => c.env),
      [undefined, undefined, undefined],
    );
    const other = injectSidecars(optedInPod({ spec: { containers: [{ name: 'app', image: 'app' }] } }), templates, 'ns');
    assert.equal(sidecar(other.pod, 'app').env, undefined);
    assert.deepEqual(other.warnings, ['appContainers of template "otel" names "api", not containers of the pod']);
  });

  it("never gives the template's env to the pod's init containers, as before", () => {
    const templates = compile(
      doc(
        'otel',
        '  appContainers: { include: [setup, app] }\n  env: [{ name: OTEL, value: "1" }]\n  containers:\n    - { name: otel, image: otel/collector:1 }\n',
      ),
    );
    const pod = optedInPod({ spec: { initContainers: [{ name: 'setup', image: 'setup' }], containers: [{ name: 'app', image: 'app' }] } });
    const { pod: out, warnings } = injectSidecars(pod, templates, 'ns');
    assert.equal(out.spec!.initContainers![0]!.env, undefined);
    assert.deepEqual(sidecar(out, 'app').env, [{ name: 'OTEL', value: '1' }]);
    assert.deepEqual(warnings, ['appContainers of template "otel" names "setup", not containers of the pod']);
  });
});
