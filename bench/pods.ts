/**
 * The pods the benchmark sends, shaped as the kube-apiserver sends them: after defaulting, with the
 * fields a ReplicaSet controller's pod carries. All three opt in, so the product injects each time.
 */
import { kubeApiAccessVolume } from '../test/helpers/service-account.js';

const OPT_IN = { 'sidecar-injector.io/inject': 'true' };

function container(name: string, envCount: number, suffix: string): object {
  return {
    name,
    image: `registry.example.com/team/${name}:1.42.7`,
    ports: [
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
    ],
    env: Array.from({ length: envCount }, (_, i) => ({
      name: `${name.toUpperCase().replace(/-/g, '_')}_SETTING_${i}`,
      value: `value-${i}-for-${name}-with-some-realistic-length-${'x'.repeat(i % 17)}`,
    })),
    resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '512Mi' } },
    livenessProbe: {
      httpGet: { path: '/healthz', port: 8080, scheme: 'HTTP' },
      initialDelaySeconds: 10,
      timeoutSeconds: 1,
      periodSeconds: 10,
      successThreshold: 1,
      failureThreshold: 3,
    },
    readinessProbe: { httpGet: { path: '/ready', port: 8080, scheme: 'HTTP' }, timeoutSeconds: 1, periodSeconds: 5, successThreshold: 1, failureThreshold: 3 },
    volumeMounts: [
      { name: 'data', mountPath: '/data' },
      { name: `kube-api-access-${suffix}`, readOnly: true, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
    ],
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    imagePullPolicy: 'IfNotPresent',
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } },
  };
}

/** A pod of a Deployment with `containers` containers of `envCount` env vars each. */
function deploymentPod(app: string, containers: number, envCount: number): object {
  const suffix = 'x7k2p';
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `${app}-6d4f9c7b8-`,
      namespace: 'shop',
      labels: { app, 'app.kubernetes.io/name': app, 'app.kubernetes.io/part-of': 'shop', 'pod-template-hash': '6d4f9c7b8', ...OPT_IN },
      annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-01T10:00:00Z', 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090' },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: `${app}-6d4f9c7b8`,
          uid: '1f0c2a9e-6a55-4c1e-9d0a-3b8f7e2d1c4a',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      volumes: [{ name: 'data', emptyDir: {} }, kubeApiAccessVolume(`kube-api-access-${suffix}`)],
      containers: Array.from({ length: containers }, (_, i) => container(i === 0 ? app : `${app}-helper-${i}`, envCount, suffix)),
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      serviceAccount: 'default',
      securityContext: { runAsUser: 1000, fsGroup: 2000 },
      schedulerName: 'default-scheduler',
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
      priority: 0,
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
    },
  };
}

/** The three sizes of the benchmark, in the order they run. */
export const Pods = {
  small: {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', namespace: 'shop', labels: { app: 'web', ...OPT_IN } },
    spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] },
  },
  typical: deploymentPod('checkout', 1, 12),
  large: deploymentPod('monolith', 5, 76),
  /** Not part of the default run (`--pods optout`): the typical pod without the opt-in label, to see the transport's own cost. */
  optout: withoutOptIn(deploymentPod('checkout', 1, 12)),
} as const;

/** The sizes a plain `npm run bench` measures. */
export const DefaultSizes = ['small', 'typical', 'large'] as const;

function withoutOptIn(pod: object): object {
  const p = structuredClone(pod) as { metadata: { labels: Record<string, string> } };
  delete p.metadata.labels['sidecar-injector.io/inject'];
  return p;
}
export type PodSize = keyof typeof Pods;

/**
 * An AdmissionReview for `pod` with a placeholder uid, split around it so each request gets a fresh
 * one cheaply. With `distinct`, the pod also carries the uid in a label (`middle` is the text between
 * the two), so every review is a different pod and the product's answer cache never answers one:
 * the cost of a pod seen for the first time, as when every pod comes from another Deployment.
 */
export function reviewTemplate(
  pod: object,
  opts: { readonly distinct?: boolean } = {},
): { readonly prefix: Buffer; readonly middle?: Buffer; readonly suffix: Buffer; readonly bytes: number } {
  const marker = '00000000-0000-4000-8000-000000000000';
  const labelled = opts.distinct ? withLabel(pod, 'bench.sidecar-injector.io/pod', marker) : pod;
  // In the apiserver's field order (Go's encoding/json follows the struct): kind, apiVersion, request.
  const review = {
    kind: 'AdmissionReview',
    apiVersion: 'admission.k8s.io/v1',
    request: {
      uid: marker,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'shop',
      operation: 'CREATE',
      userInfo: {
        username: 'system:serviceaccount:kube-system:replicaset-controller',
        uid: 'a3b5c7d9-1111-2222-3333-444455556666',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
      },
      object: labelled,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
  const text = JSON.stringify(review);
  const parts = text.split(marker);
  const bytes = Buffer.byteLength(text);
  if (parts.length === 2) return { prefix: Buffer.from(parts[0]!), suffix: Buffer.from(parts[1]!), bytes };
  return { prefix: Buffer.from(parts[0]!), middle: Buffer.from(parts[1]!), suffix: Buffer.from(parts[2]!), bytes };
}

function withLabel(pod: object, key: string, value: string): object {
  const p = structuredClone(pod) as { metadata: { labels?: Record<string, string> } };
  p.metadata.labels = { ...p.metadata.labels, [key]: value };
  return p;
}
