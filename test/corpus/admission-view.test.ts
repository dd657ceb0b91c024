import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admissionView } from './admission-view.js';
import { corpusManifests, DefaultNamespace } from './corpus.js';

const manifest = (file: string) => corpusManifests().find((m) => m.file === file)!.object;

describe('the corpus pod as admission sees it', () => {
  it("gives a Deployment's pod its ReplicaSet's generateName, hash label and owner, in the workload's namespace", () => {
    const { pod, namespace } = admissionView(manifest('cert-manager-webhook.yaml'), ['vault-agent'], DefaultNamespace);
    assert.equal(namespace, 'cert-manager');
    assert.equal(pod.metadata.name, undefined);
    const hash = pod.metadata.labels['pod-template-hash'];
    assert.match(hash, /^[a-z0-9]{10}$/);
    assert.equal(pod.metadata.generateName, `cert-manager-webhook-${hash}-`);
    assert.deepEqual(
      pod.metadata.ownerReferences.map((o: any) => [o.kind, o.name, o.controller]),
      [['ReplicaSet', `cert-manager-webhook-${hash}`, true]],
    );
    assert.equal(pod.metadata.labels['sidecar-injector.io/inject'], 'true');
    assert.equal(pod.metadata.annotations['sidecar-injector.io/templates'], 'vault-agent');
  });

  it("names a StatefulSet's pod and turns its claim templates into volumes", () => {
    const { pod } = admissionView(manifest('k8s-examples-cassandra-statefulset.yaml'), ['x'], DefaultNamespace);
    assert.equal(pod.metadata.name, 'cassandra-0');
    assert.equal(pod.metadata.generateName, undefined);
    assert.deepEqual(pod.spec.volumes.find((v: any) => v.name === 'cassandra-data').persistentVolumeClaim, { claimName: 'cassandra-data-cassandra-0' });
  });

  it("owns a CronJob's pod by its Job, with the Job's labels and tracking finalizer", () => {
    const { pod } = admissionView(manifest('istio-cronjob.yaml'), ['x'], DefaultNamespace);
    assert.deepEqual(
      pod.metadata.ownerReferences.map((o: any) => o.kind),
      ['Job'],
    );
    assert.match(pod.metadata.generateName, /^hellocron-\d+-$/);
    assert.equal(pod.metadata.labels['batch.kubernetes.io/job-name'], pod.metadata.ownerReferences[0].name);
    assert.deepEqual(pod.metadata.finalizers, ['batch.kubernetes.io/job-tracking']);
    assert.equal(pod.spec.restartPolicy, 'OnFailure');
  });

  it("drops the fields a chart rendered empty, as the apiserver's typed decoding does (`args:` with nothing after it)", () => {
    const written = manifest('helm-prom-prometheus-redis-exporter.yaml');
    assert.equal(written.spec.template.spec.containers[0].args, null, 'the manifest as kubectl sends it');
    const { pod } = admissionView(written, ['x'], DefaultNamespace);
    assert.equal('args' in pod.spec.containers[0], false);
    assert.deepEqual(
      pod.spec.containers[0].volumeMounts.map((m: any) => m.name),
      [pod.spec.volumes.at(-1).name],
      'only the token the ServiceAccount plugin mounts',
    );
    assert.equal(JSON.stringify(pod).includes('null'), false);
  });

  it('applies the core/v1 defaults: a volume with no source is an emptyDir, file modes default to 0644, a YAML 1.1 octal is read as octal', () => {
    const injected = admissionView(manifest('istio-hello-injected.yaml'), ['x'], DefaultNamespace).pod;
    assert.deepEqual(
      injected.spec.volumes.find((v: any) => v.name === 'workload-socket'),
      { name: 'workload-socket', emptyDir: {} },
    );
    assert.equal(injected.spec.volumes.find((v: any) => v.name === 'istiod-ca-cert').configMap.defaultMode, 420);
    const redis = admissionView(manifest('argocd-redis-ha-server.yaml'), ['x'], DefaultNamespace).pod;
    assert.equal(redis.spec.volumes.find((v: any) => v.name === 'health').configMap.defaultMode, 0o755);
    const operator = admissionView(manifest('datadog-operator-deployment.yaml'), ['x'], DefaultNamespace).pod;
    assert.ok(
      operator.spec.volumes.every((v: any) => v.name.startsWith('kube-api-access-')),
      '`volumes: null` is no volumes, then the token volume',
    );
  });

  it("adds the ServiceAccount plugin's token volume to every container, unless automount is off", () => {
    const { pod } = admissionView(manifest('istio-multi-init.yaml'), ['x'], DefaultNamespace);
    const [volume] = pod.spec.volumes.filter((v: any) => v.name.startsWith('kube-api-access-'));
    for (const c of [...pod.spec.initContainers, ...pod.spec.containers]) {
      assert.ok(
        c.volumeMounts.some((m: any) => m.name === volume.name && m.mountPath === '/var/run/secrets/kubernetes.io/serviceaccount'),
        c.name,
      );
    }
    assert.equal(pod.spec.serviceAccountName, 'default');
  });
});
