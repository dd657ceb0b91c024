/**
 * Turns a manifest (a Pod or a workload) into the Pod a mutating webhook receives for it, written apart
 * from src/workload so that the corpus test does not check the product against its own reading:
 *
 * 1. The controller makes the pod from the pod template (kubernetes/kubernetes pkg/controller/
 *    controller_utils.go GetPodFromTemplate, and each controller's additions): the template's labels,
 *    annotations and spec; no name but a `generateName` (a StatefulSet's pod has a name); the
 *    controller's labels; an ownerReference to the controlling object.
 * 2. The apiserver decodes it into core/v1's Go types, so a field the manifest left empty (`args:` with
 *    nothing after it, as Helm charts often render) is null in the JSON kubectl sends and absent from
 *    the object the webhook receives (a nil slice, map or pointer, an empty string: all omitempty);
 *    and it applies the core/v1 defaults (pkg/apis/core/v1/defaults.go), so the webhook
 *    sees `emptyDir: {}` where the manifest had a volume with no source or `emptyDir:` with no value,
 *    `defaultMode: 420` on configMap/secret/projected/downwardAPI volumes, probe and port defaults.
 * 3. The admission plugins that run before MutatingAdmissionWebhook add their parts: ServiceAccount
 *    (serviceAccountName and the projected `kube-api-access-*` volume mounted in every container),
 *    DefaultTolerationSeconds, Priority.
 *
 * The same defaulting is applied again after the webhook's patch, as the apiserver does before it
 * re-invokes a webhook or runs validation.
 */
import { createHash } from 'node:crypto';
import { kubeApiAccessVolume } from '../helpers/service-account.js';
import { Probes, VolumeSources } from './pod-validation.js';

type Obj = Record<string, any>;

/** What admission sees: the pod, and the namespace of the request. */
export interface AdmissionView {
  readonly pod: Obj;
  readonly namespace: string;
  /** `Deployment`, `Job`, ... or `Pod`. */
  readonly kind: string;
}

export const OptInLabel = 'sidecar-injector.io/inject';
export const TemplatesAnnotation = 'sidecar-injector.io/templates';

/**
 * The value as the apiserver's typed decoding leaves it: every object field whose value is null
 * dropped. (A null map value or list item, a label's say, Go decodes to its zero value, "" for a
 * string; kubectl-readable manifests of the corpus hold none.)
 */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => [k, withoutNulls(v)]),
  );
}

/**
 * The pod the apiserver sends to the webhook for `manifest`, opted in to the given templates the way a
 * user opts in: the label and the annotation on the pod (template) metadata.
 */
export function admissionView(written: Obj, templates: readonly string[], fallbackNamespace: string): AdmissionView {
  const manifest = withoutNulls(written) as Obj;
  const kind = String(manifest['kind']);
  const namespace = manifest['metadata']?.namespace ?? fallbackNamespace;
  const optIn = (meta: Obj | undefined): Obj => ({
    ...meta,
    labels: { ...meta?.['labels'], [OptInLabel]: 'true' },
    annotations: { ...meta?.['annotations'], [TemplatesAnnotation]: templates.join(',') },
  });
  let pod: Obj;
  if (kind === 'Pod') {
    const copy = structuredClone(manifest);
    pod = { ...copy, apiVersion: 'v1', kind: 'Pod', metadata: { ...optIn(copy['metadata']), namespace } };
    delete pod['status'];
  } else {
    pod = controllerPod(kind, structuredClone(manifest), namespace, optIn);
  }
  applyServiceAccountAdmission(pod);
  applyDefaultTolerationSeconds(pod);
  pod['spec']['priority'] ??= 0;
  pod['spec']['preemptionPolicy'] ??= 'PreemptLowerPriority';
  return { pod: defaultPod(pod), namespace, kind };
}

function controllerPod(kind: string, obj: Obj, namespace: string, optIn: (meta: Obj | undefined) => Obj): Obj {
  const name: string = obj['metadata']['name'];
  const uid = uidOf(`${kind}/${namespace}/${name}`);
  const owner = (k: string, api: string, n: string, u: string) => ({ apiVersion: api, kind: k, name: n, uid: u, controller: true, blockOwnerDeletion: true });
  const fromTemplate = (template: Obj): Obj => {
    const meta = optIn(template['metadata']);
    return { apiVersion: 'v1', kind: 'Pod', metadata: { labels: meta['labels'], annotations: meta['annotations'], namespace }, spec: template['spec'] };
  };
  switch (kind) {
    case 'Deployment': {
      const pod = fromTemplate(obj['spec']['template']);
      const hash = shortHash(JSON.stringify(obj['spec']['template']));
      const rs = `${name}-${hash}`;
      pod['metadata'] = {
        generateName: `${rs}-`,
        ...pod['metadata'],
        labels: { ...pod['metadata']['labels'], 'pod-template-hash': hash },
        ownerReferences: [owner('ReplicaSet', 'apps/v1', rs, uidOf(rs))],
      };
      return pod;
    }
    case 'ReplicaSet':
    case 'ReplicationController':
    case 'DaemonSet': {
      const pod = fromTemplate(obj['spec']['template']);
      const api = kind === 'ReplicationController' ? 'v1' : 'apps/v1';
      const labels = kind === 'DaemonSet' ? { 'controller-revision-hash': shortHash(name), 'pod-template-generation': '1' } : {};
      pod['metadata'] = {
        generateName: `${name}-`,
        ...pod['metadata'],
        labels: { ...pod['metadata']['labels'], ...labels },
        ownerReferences: [owner(kind, api, name, uid)],
      };
      if (kind === 'DaemonSet') daemonSetScheduling(pod['spec']);
      return pod;
    }
    case 'StatefulSet': {
      const pod = fromTemplate(obj['spec']['template']);
      const podName = `${name}-0`;
      pod['metadata'] = {
        name: podName,
        ...pod['metadata'],
        labels: {
          ...pod['metadata']['labels'],
          'apps.kubernetes.io/pod-index': '0',
          'controller-revision-hash': `${name}-${shortHash(name)}`,
          'statefulset.kubernetes.io/pod-name': podName,
        },
        ownerReferences: [owner('StatefulSet', 'apps/v1', name, uid)],
      };
      // pkg/controller/statefulset/stateful_set_utils.go updateStorage: each claim template becomes a
      // persistentVolumeClaim volume of the same name, replacing a template volume of that name.
      const claims: Obj[] = obj['spec']['volumeClaimTemplates'] ?? [];
      if (claims.length > 0) {
        const names = new Set(claims.map((c) => c['metadata']['name']));
        const volumes: Obj[] = (pod['spec']['volumes'] ?? []).filter((v: Obj) => !names.has(v['name']));
        for (const c of claims) volumes.push({ name: c['metadata']['name'], persistentVolumeClaim: { claimName: `${c['metadata']['name']}-${podName}` } });
        pod['spec']['volumes'] = volumes;
      }
      pod['spec']['hostname'] ??= podName;
      if (obj['spec']['serviceName']) pod['spec']['subdomain'] ??= obj['spec']['serviceName'];
      return pod;
    }
    case 'Job':
      return jobPod(obj, name, uid, fromTemplate, owner);
    case 'CronJob': {
      // pkg/controller/cronjob/utils.go getJobFromTemplate2: the Job is named <cronjob>-<scheduled minutes>.
      const jobName = `${name}-29400000`;
      const job = { metadata: { name: jobName }, spec: obj['spec']['jobTemplate']['spec'] };
      return jobPod(job, jobName, uidOf(jobName), fromTemplate, owner);
    }
    default:
      throw new Error(`no controller makes pods for kind ${kind}`);
  }
}

function jobPod(job: Obj, name: string, uid: string, fromTemplate: (t: Obj) => Obj, owner: (k: string, api: string, n: string, u: string) => Obj): Obj {
  const pod = fromTemplate(job['spec']['template']);
  // The Job's defaulting adds its selector labels to the template (pkg/registry/batch/job/strategy.go
  // generateSelector); the Job controller adds the tracking finalizer.
  pod['metadata'] = {
    generateName: `${name}-`,
    ...pod['metadata'],
    labels: {
      ...pod['metadata']['labels'],
      'batch.kubernetes.io/controller-uid': uid,
      'batch.kubernetes.io/job-name': name,
      'controller-uid': uid,
      'job-name': name,
    },
    finalizers: ['batch.kubernetes.io/job-tracking'],
    ownerReferences: [owner('Job', 'batch/v1', name, uid)],
  };
  return pod;
}

/** pkg/controller/daemon/util: the pod is pinned to its node by affinity and tolerates node conditions. */
function daemonSetScheduling(spec: Obj): void {
  spec['affinity'] = {
    ...spec['affinity'],
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-1'] }] }] },
    },
  };
  const tolerations: Obj[] = spec['tolerations'] ?? [];
  for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) tolerations.push({ key, operator: 'Exists', effect: 'NoExecute' });
  for (const key of [
    'node.kubernetes.io/disk-pressure',
    'node.kubernetes.io/memory-pressure',
    'node.kubernetes.io/pid-pressure',
    'node.kubernetes.io/unschedulable',
  ])
    tolerations.push({ key, operator: 'Exists', effect: 'NoSchedule' });
  if (spec['hostNetwork'] === true) tolerations.push({ key: 'node.kubernetes.io/network-unavailable', operator: 'Exists', effect: 'NoSchedule' });
  spec['tolerations'] = tolerations;
}

/** plugin/pkg/admission/serviceaccount/admission.go: the account, and its token projected into every container. */
function applyServiceAccountAdmission(pod: Obj): void {
  const spec = pod['spec'];
  spec['serviceAccountName'] ||= spec['serviceAccount'] || 'default';
  spec['serviceAccount'] = spec['serviceAccountName'];
  if (spec['automountServiceAccountToken'] === false) return;
  const path = '/var/run/secrets/kubernetes.io/serviceaccount';
  const all: Obj[] = [...(spec['initContainers'] ?? []), ...(spec['containers'] ?? [])];
  if (all.some((c) => (c['volumeMounts'] ?? []).some((m: Obj) => m['mountPath'] === path))) return;
  const name = `kube-api-access-${shortHash(JSON.stringify(pod['metadata'])).slice(0, 5)}`;
  spec['volumes'] = [...(spec['volumes'] ?? []), kubeApiAccessVolume(name)];
  for (const c of all) c['volumeMounts'] = [...(c['volumeMounts'] ?? []), { name, readOnly: true, mountPath: path }];
}

/** plugin/pkg/admission/defaulttolerationseconds: 300 s for not-ready and unreachable. */
function applyDefaultTolerationSeconds(pod: Obj): void {
  const tolerations: Obj[] = pod['spec']['tolerations'] ?? [];
  for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
    if (!tolerations.some((t) => t['key'] === key && (t['effect'] === 'NoExecute' || t['effect'] === undefined))) {
      tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
    }
  }
  pod['spec']['tolerations'] = tolerations;
}

/**
 * The core/v1 defaults the apiserver applies when it decodes a Pod (pkg/apis/core/v1/defaults.go),
 * for the fields a sidecar template or a manifest of the corpus uses. Returns the same object.
 */
export function defaultPod(pod: Obj): Obj {
  const spec = pod['spec'];
  spec['restartPolicy'] ??= 'Always';
  spec['terminationGracePeriodSeconds'] ??= 30;
  spec['dnsPolicy'] ??= 'ClusterFirst';
  spec['securityContext'] ??= {};
  spec['schedulerName'] ??= 'default-scheduler';
  spec['enableServiceLinks'] ??= true;
  if (spec['hostNetwork'] === true) {
    // SetDefaults_PodSpec: with hostNetwork, each containerPort's hostPort defaults to it.
    for (const c of [...(spec['initContainers'] ?? []), ...(spec['containers'] ?? [])]) for (const p of c['ports'] ?? []) p['hostPort'] ??= p['containerPort'];
  }
  for (const list of ['initContainers', 'containers']) for (const c of spec[list] ?? []) defaultContainer(c);
  if (Array.isArray(spec['volumes'])) for (const v of spec['volumes']) defaultVolume(v);
  for (const key of ['volumes', 'initContainers', 'tolerations', 'imagePullSecrets']) if (spec[key] === null) delete spec[key];
  return pod;
}

function defaultContainer(c: Obj): void {
  c['terminationMessagePath'] ??= '/dev/termination-log';
  c['terminationMessagePolicy'] ??= 'File';
  c['imagePullPolicy'] ??= pullPolicy(String(c['image'] ?? ''));
  c['resources'] ??= {};
  for (const key of ['volumeMounts', 'env', 'ports']) if (c[key] === null) delete c[key];
  for (const p of c['ports'] ?? []) p['protocol'] ??= 'TCP';
  for (const e of c['env'] ?? []) if (e['valueFrom']?.fieldRef) e['valueFrom']['fieldRef']['apiVersion'] ??= 'v1';
  for (const probe of Probes) {
    const p = c[probe];
    if (p == null) continue;
    p['timeoutSeconds'] ??= 1;
    p['periodSeconds'] ??= 10;
    p['successThreshold'] ??= 1;
    p['failureThreshold'] ??= 3;
    defaultHandler(p);
  }
  for (const hook of ['postStart', 'preStop']) if (c['lifecycle']?.[hook]) defaultHandler(c['lifecycle'][hook]);
}

function defaultHandler(h: Obj): void {
  if (h['httpGet']) {
    h['httpGet']['path'] ??= '/';
    h['httpGet']['scheme'] ??= 'HTTP';
  }
}

/** SetDefaults_Container: Always for `:latest` or no tag, IfNotPresent otherwise (a digest included). */
function pullPolicy(image: string): string {
  if (image.includes('@')) return 'IfNotPresent';
  const last = image.slice(image.lastIndexOf('/') + 1);
  const tag = last.includes(':') ? last.slice(last.indexOf(':') + 1) : '';
  return tag === '' || tag === 'latest' ? 'Always' : 'IfNotPresent';
}

/** SetDefaults_Volume and the per-source defaults; a JSON null source is an absent one. */
function defaultVolume(v: Obj): void {
  for (const s of VolumeSources) if (v[s] === null) delete v[s];
  if (!VolumeSources.some((s) => v[s] !== undefined)) v['emptyDir'] = {};
  for (const s of ['secret', 'configMap', 'projected', 'downwardAPI']) if (v[s]) v[s]['defaultMode'] ??= 420;
  if (v['hostPath']) v['hostPath']['type'] ??= '';
  for (const item of v['downwardAPI']?.items ?? []) if (item['fieldRef']) item['fieldRef']['apiVersion'] ??= 'v1';
  for (const source of v['projected']?.sources ?? []) {
    if (source['serviceAccountToken']) source['serviceAccountToken']['expirationSeconds'] ??= 3600;
    for (const item of source['downwardAPI']?.items ?? []) if (item['fieldRef']) item['fieldRef']['apiVersion'] ??= 'v1';
  }
}

function shortHash(text: string): string {
  // A pod-template-hash is ten characters of [bcdfghjklmnpqrstvwxz2456789]; any stable ten do here.
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  const bytes = createHash('sha256').update(text).digest();
  return Array.from(bytes.subarray(0, 10), (b) => alphabet[b % alphabet.length]).join('');
}

function uidOf(text: string): string {
  const h = createHash('sha256').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
