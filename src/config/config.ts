import type { ValidateFunction } from 'ajv';
import { InjectorError } from '../errors.js';
import { IMAGE_MIRROR_FLAG, parseImageMirrors, type ImageMirrors } from '../kube-values/image.js';
import { validate as validateGenerated } from '../generated/config-validator.js';

/**
 * Every setting in one table: its flag, its environment variable, its JSON schema (with the
 * default) and a line of help. Flags win over environment variables, which win over defaults; the
 * result is validated and frozen before anything starts (Fastify's initial-config-validation).
 */
export const Options = {
  port: {
    flag: 'port',
    env: 'SIDECAR_INJECTOR_PORT',
    schema: { type: 'integer', minimum: 0, maximum: 65535, default: 8443 },
    help: 'HTTPS port for /mutate and /validate',
  },
  healthPort: {
    flag: 'health-port',
    env: 'SIDECAR_INJECTOR_HEALTH_PORT',
    schema: { type: 'integer', minimum: 0, maximum: 65535, default: 8081 },
    help: 'plain-HTTP port for /healthz and /readyz',
  },
  host: { flag: 'host', env: 'SIDECAR_INJECTOR_HOST', schema: { type: 'string', default: '0.0.0.0' }, help: 'address both servers listen on' },
  certDir: {
    flag: 'cert-dir',
    env: 'SIDECAR_INJECTOR_CERT_DIR',
    schema: { type: 'string', default: '' },
    help: 'directory with tls.crt and tls.key (a kubernetes.io/tls Secret); empty: make a self-signed certificate',
  },
  selfSignedDir: {
    flag: 'self-signed-dir',
    env: 'SIDECAR_INJECTOR_SELF_SIGNED_DIR',
    schema: { type: 'string', default: '.certs' },
    help: 'where the self-signed CA is written when --cert-dir is not set',
  },
  certSecret: {
    flag: 'cert-secret',
    env: 'SIDECAR_INJECTOR_CERT_SECRET',
    schema: { type: 'string', default: '' },
    help: 'Secret in --namespace that holds the CA and serving certificate, created, renewed and rotated through the Kubernetes API, with the CA patched into the webhook configurations; empty: use --cert-dir',
  },
  namespace: {
    flag: 'namespace',
    env: 'SIDECAR_INJECTOR_NAMESPACE',
    schema: { type: 'string', default: '' },
    help: "namespace of the Service and the certificate Secret; empty: the ServiceAccount's namespace",
  },
  serviceName: {
    flag: 'service-name',
    env: 'SIDECAR_INJECTOR_SERVICE_NAME',
    schema: { type: 'string', minLength: 1, default: 'sidecar-injector' },
    help: 'Service in front of the webhook; the serving certificate names <service>.<namespace>.svc',
  },
  webhookConfig: {
    flag: 'webhook-config',
    env: 'SIDECAR_INJECTOR_WEBHOOK_CONFIG',
    schema: { type: 'string', default: 'sidecar-injector' },
    help: 'name of the Mutating- and ValidatingWebhookConfiguration whose caBundle --cert-secret keeps current; empty: leave caBundle alone',
  },
  kubeconfig: {
    flag: 'kubeconfig',
    env: 'SIDECAR_INJECTOR_KUBECONFIG',
    schema: { type: 'string', default: '' },
    help: 'kubeconfig file for --cert-secret; empty: the pod ServiceAccount, else $KUBECONFIG or ~/.kube/config',
  },
  certCheckInterval: {
    flag: 'cert-check-interval',
    env: 'SIDECAR_INJECTOR_CERT_CHECK_INTERVAL',
    schema: { type: 'integer', minimum: 1, maximum: 3600, default: 60 },
    help: 'seconds between checks of the certificate (the Secret or the --cert-dir files); a new one is served without a restart',
  },
  shutdownDelay: {
    flag: 'shutdown-delay',
    env: 'SIDECAR_INJECTOR_SHUTDOWN_DELAY',
    schema: { type: 'integer', minimum: 0, maximum: 300, default: 0 },
    help: 'seconds to keep answering after SIGTERM, not ready, while endpoints drop the pod (the preStop window)',
  },
  drainTimeout: {
    flag: 'drain-timeout',
    env: 'SIDECAR_INJECTOR_DRAIN_TIMEOUT',
    schema: { type: 'integer', minimum: 1, maximum: 300, default: 15 },
    help: 'seconds to let in-flight reviews finish after the server stops accepting',
  },
  revision: {
    flag: 'revision',
    env: 'SIDECAR_INJECTOR_REVISION',
    schema: { type: 'string', maxLength: 63, pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$', default: '' },
    help: "this install's revision (the value of the sidecar-injector.io/rev label its webhooks match), recorded in the status annotation of every pod it injects; empty: the default install",
  },
  mode: {
    flag: 'mode',
    env: 'SIDECAR_INJECTOR_MODE',
    schema: { enum: ['webhook', 'policy', 'hybrid'], default: 'webhook' },
    help: 'webhook: serve /mutate and /validate over HTTPS; policy: serve no webhook (no certificate, no --port), keep the templates compiled to MutatingAdmissionPolicies and a ValidatingAdmissionPolicy in the cluster and report on the health port; hybrid: both, the policies inject and check the templates that compile, the webhook the rest',
  },
  policyApi: {
    flag: 'policy-api',
    env: 'SIDECAR_INJECTOR_POLICY_API',
    schema: { enum: ['auto', 'v1', 'v1beta1'], default: 'auto' },
    help: 'admissionregistration.k8s.io version the policies of --mode policy and hybrid are written in; auto: the one API discovery says serves mutatingadmissionpolicies (v1 from Kubernetes 1.36, v1beta1 in 1.34 and 1.35 with the beta API enabled)',
  },
  templatesDir: {
    flag: 'templates-dir',
    env: 'SIDECAR_INJECTOR_TEMPLATES_DIR',
    schema: { type: 'string', minLength: 1, default: './templates' },
    help: 'directory of SidecarTemplate YAML files',
  },
  templatesSource: {
    flag: 'templates-source',
    env: 'SIDECAR_INJECTOR_TEMPLATES_SOURCE',
    schema: { enum: ['dir', 'cluster', 'both'], default: 'dir' },
    help: "where templates come from: dir (--templates-dir, a mounted ConfigMap), cluster (SidecarTemplate objects: those in --namespace for every pod, a team's for its namespace's pods), or both (the directory's are cluster-wide too)",
  },
  templatesPollSeconds: {
    flag: 'templates-poll-seconds',
    env: 'SIDECAR_INJECTOR_TEMPLATES_POLL_SECONDS',
    schema: { type: 'integer', minimum: 0, maximum: 3600, default: 5 },
    help: 're-read the templates directory this often besides file-system events (0: events only); a valid new set replaces the old one',
  },
  templateHistoryMinutes: {
    flag: 'template-history-minutes',
    env: 'SIDECAR_INJECTOR_TEMPLATE_HISTORY_MINUTES',
    schema: { type: 'integer', minimum: 0, maximum: 1440, default: 10 },
    help: 'minutes /validate still accepts pods injected with a template set this replica replaced, and, after start, pods with the status of an earlier release (a rollout reaches replicas at different times); 0: the current set only',
  },
  logLevel: {
    flag: 'log-level',
    env: 'SIDECAR_INJECTOR_LOG_LEVEL',
    schema: { enum: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], default: 'info' },
    help: 'pino log level',
  },
  clientCa: {
    flag: 'client-ca',
    env: 'SIDECAR_INJECTOR_CLIENT_CA',
    schema: { type: 'string', default: '' },
    help: "PEM file of the CA that signs the apiserver's client certificate; when set, only clients with a certificate from it are served (mutual TLS)",
  },
  requestTimeout: {
    flag: 'request-timeout',
    env: 'SIDECAR_INJECTOR_REQUEST_TIMEOUT',
    schema: { type: 'integer', minimum: 1, maximum: 60, default: 10 },
    help: 'seconds a client may take to send a whole review; the TLS handshake and the headers get at most 5 of them',
  },
  maxConnections: {
    flag: 'max-connections',
    env: 'SIDECAR_INJECTOR_MAX_CONNECTIONS',
    schema: { type: 'integer', minimum: 1, maximum: 65535, default: 1024 },
    help: 'open connections to the HTTPS port; a connection beyond this closes the oldest idle one (no request in progress, a TLS handshake not done included), or is closed itself when every connection is busy',
  },
  answerCacheMb: {
    flag: 'answer-cache-mb',
    env: 'SIDECAR_INJECTOR_ANSWER_CACHE_MB',
    schema: { type: 'integer', minimum: 0, maximum: 1024, default: 4 },
    help: 'MiB per endpoint of answers kept for reviews that repeat but for their uid (the pods of one ReplicaSet); 0: compute every answer',
  },
  maxContainers: {
    flag: 'max-containers',
    env: 'SIDECAR_INJECTOR_MAX_CONTAINERS',
    schema: { type: 'integer', minimum: 1, maximum: 100000, default: 250 },
    help: 'containers, initContainers and ephemeralContainers of one pod; a pod with more is refused (400)',
  },
  maxEnvPerContainer: {
    flag: 'max-env-per-container',
    env: 'SIDECAR_INJECTOR_MAX_ENV_PER_CONTAINER',
    schema: { type: 'integer', minimum: 1, maximum: 100000, default: 1000 },
    help: 'env vars of one container; a pod with more is refused (400)',
  },
  maxMountsPerContainer: {
    flag: 'max-mounts-per-container',
    env: 'SIDECAR_INJECTOR_MAX_MOUNTS_PER_CONTAINER',
    schema: { type: 'integer', minimum: 1, maximum: 100000, default: 1000 },
    help: 'volumeMounts of one container; a pod with more is refused (400)',
  },
  maxPortsPerContainer: {
    flag: 'max-ports-per-container',
    env: 'SIDECAR_INJECTOR_MAX_PORTS_PER_CONTAINER',
    schema: { type: 'integer', minimum: 1, maximum: 100000, default: 10000 },
    help: 'ports of one container; a pod with more is refused (400)',
  },
  maxVolumes: {
    flag: 'max-volumes',
    env: 'SIDECAR_INJECTOR_MAX_VOLUMES',
    schema: { type: 'integer', minimum: 1, maximum: 100000, default: 1000 },
    help: 'volumes of one pod; a pod with more is refused (400)',
  },
  maxObjectKeys: {
    flag: 'max-object-keys',
    env: 'SIDECAR_INJECTOR_MAX_OBJECT_KEYS',
    schema: { type: 'integer', minimum: 1, maximum: 1000000, default: 4096 },
    help: 'keys of one JSON object in a review (labels, annotations, any map); a review with more is refused (400) before it is parsed',
  },
  maxJsonNodes: {
    flag: 'max-json-nodes',
    env: 'SIDECAR_INJECTOR_MAX_JSON_NODES',
    schema: { type: 'integer', minimum: 1, maximum: 10000000, default: 49152 },
    help: 'JSON nodes in one review: objects, lists, keys and list items; a review with more is refused (400) before it is parsed',
  },
  maxJsonKeys: {
    flag: 'max-json-keys',
    env: 'SIDECAR_INJECTOR_MAX_JSON_KEYS',
    schema: { type: 'integer', minimum: 1, maximum: 10000000, default: 20480 },
    help: 'keys of all JSON objects in one review, the costliest values to parse; a review with more is refused (400) before it is parsed',
  },
  maxPatchKib: {
    flag: 'max-patch-kib',
    env: 'SIDECAR_INJECTOR_MAX_PATCH_KIB',
    schema: { type: 'integer', minimum: 1, maximum: 65536, default: 1024 },
    help: 'KiB of JSON patch in one answer; a pod whose patch would be larger is refused (400) instead',
  },
  maxInflight: {
    flag: 'max-inflight',
    env: 'SIDECAR_INJECTOR_MAX_INFLIGHT',
    schema: { type: 'integer', minimum: 1, maximum: 10000, default: 32 },
    help: 'reviews at once from the end of their body until their answer is flushed to the client; one more is answered 429 with Retry-After: 1',
  },
  bodyTimeout: {
    flag: 'body-timeout',
    env: 'SIDECAR_INJECTOR_BODY_TIMEOUT',
    schema: { type: 'integer', minimum: 1, maximum: 60, default: 2 },
    help: 'seconds from the end of the headers to the end of the body; a slower body is dropped with a 408 (the apiserver sends a review at once)',
  },
  bodiesInTransitMb: {
    flag: 'bodies-in-transit-mb',
    env: 'SIDECAR_INJECTOR_BODIES_IN_TRANSIT_MB',
    schema: { type: 'integer', minimum: 1, maximum: 1024, default: 32 },
    help: 'MiB of review bodies being received at once over all connections (what each has sent so far); a body that does not fit is refused with a 429',
  },
  ownerEvents: {
    flag: 'owner-events',
    env: 'SIDECAR_INJECTOR_OWNER_EVENTS',
    schema: { enum: ['on', 'off'], default: 'on' },
    help: "on: a pod refused for a reason its owner can fix (an unknown template, a refused override, sidecars missing) gets a Warning Event on its controller (a ReplicaSet's Deployment, a Job, a StatefulSet...), at most one per owner and reason a minute, never for a dry run; needs create on events and get on replicasets",
  },
  imageMirror: {
    flag: IMAGE_MIRROR_FLAG,
    env: 'SIDECAR_INJECTOR_IMAGE_MIRROR',
    schema: { type: 'string', default: '' },
    repeatable: true,
    help: "registry mirror that a policy or webhook after the injector rewrites images to, as SOURCE=MIRROR (docker.io=mirror.example.com/dockerhub): /validate then accepts a sidecar running its template's repository from the mirror; repeat the flag, or separate entries with commas",
  },
} as const;

type Schema = (typeof Options)[keyof typeof Options]['schema'];
type ValueOf<S extends Schema> = S extends { type: 'integer' } ? number : S extends { enum: readonly (infer E)[] } ? E : string;

/** The validated, frozen configuration. */
export type Config = { readonly [K in keyof typeof Options]: ValueOf<(typeof Options)[K]['schema']> };

/** The JSON Schema of the whole configuration: an object of the settings' schemas. */
export function configSchema(): object {
  return { type: 'object', additionalProperties: false, properties: Object.fromEntries(Object.entries(Options).map(([k, o]) => [k, o.schema])) };
}

// configSchema() compiled by `npm run schema` (ajv standalone code, with the schema's defaults,
// strings coerced to integers and every error at once), as Fastify ships its config validator:
// compiling it here would load ajv's compiler and cost ~3.5 MB of RSS in every process, the
// server's included, for a check made once at start.
const validateConfig = validateGenerated as unknown as ValidateFunction;

/** Builds the configuration from flags already parsed (the CLI's, cli/serve-flags.ts), keyed by flag name without `--`, and the environment. Throws CONFIG_INVALID naming the flag. */
export function configFromFlags(flags: Readonly<Record<string, string | undefined>>, env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, unknown> = {};
  for (const [key, o] of Object.entries(Options)) {
    const value = flags[o.flag] ?? env[o.env];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  if (!validateConfig(raw)) {
    const details = (validateConfig.errors ?? []).map((e) => {
      const key = e.instancePath.slice(1) as keyof typeof Options;
      const o = Options[key];
      // Ajv's enum message does not say which values are allowed; the user needs them.
      const message =
        e.keyword === 'enum' ? `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')}` : (e.message ?? 'is invalid');
      return o ? `--${o.flag} (${o.env}) ${message}: ${JSON.stringify(raw[key])}` : message;
    });
    throw new InjectorError('CONFIG_INVALID', [details.join('; ')]);
  }
  const config = Object.freeze(raw) as Config;
  // Checked here, so a bad entry stops the start rather than surfacing at a review.
  const mirrors = readMirrors(config);
  if ('problem' in mirrors) throw new InjectorError('CONFIG_INVALID', [`--${Options.imageMirror.flag} (${Options.imageMirror.env}): ${mirrors.problem}`]);
  return config;
}

/** The registry mirrors of --image-mirror, prepared for matching (configFromFlags has checked them). */
export function imageMirrors(config: Config): ImageMirrors {
  const mirrors = readMirrors(config);
  if ('problem' in mirrors) throw new InjectorError('CONFIG_INVALID', [`--${Options.imageMirror.flag}: ${mirrors.problem}`]);
  return mirrors;
}

function readMirrors(config: Config): ReturnType<typeof parseImageMirrors> {
  return parseImageMirrors(
    config.imageMirror
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e !== ''),
  );
}
