import { LABEL_VALUE_MAX_LENGTH } from '../kube-values/label.js';

/**
 * The small structural view of the Kubernetes objects the injector reads: core/v1 pods, and the
 * admissionregistration/v1 webhook configurations that route them. Objects arrive as parsed JSON,
 * so every field is optional and everything not named here is carried through untouched.
 */
export type JsonObject = { [key: string]: unknown };

export interface NamedItem extends JsonObject {
  name: string;
}

export interface Container extends NamedItem {
  image?: string;
  restartPolicy?: string;
  env?: NamedItem[];
  volumeMounts?: VolumeMount[];
  ports?: JsonObject[];
}

export interface VolumeMount extends NamedItem {
  mountPath: string;
}

export interface PodSpec extends JsonObject {
  containers?: Container[];
  initContainers?: Container[];
  volumes?: NamedItem[];
  imagePullSecrets?: NamedItem[];
  serviceAccountName?: string;
  serviceAccount?: string;
}

interface ObjectMeta extends JsonObject {
  name?: string;
  generateName?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: JsonObject[];
}

export interface Pod extends JsonObject {
  metadata?: ObjectMeta;
  spec?: PodSpec;
}

/** True for a non-null, non-array object. */
export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export type Labels = Readonly<Record<string, string>>;

/** A frozen empty list, returned for "none" so that no empty array is made per call. */
export const NO_ITEMS: readonly never[] = Object.freeze([]);

/** A frozen empty label or annotation map, read where an object has none. */
export const NO_KEYS: Readonly<Record<string, string>> = Object.freeze({});

/** Sets `key` in `map` as an own key: assigning "__proto__" would set the prototype (and drop a string), so it is defined instead. */
export function setKey(map: Record<string, string>, key: string, value: string): void {
  if (key === '__proto__') Object.defineProperty(map, key, { value, enumerable: true, writable: true, configurable: true });
  else map[key] = value;
}

/** The four operators of a metav1.LabelSelectorRequirement. */
export const SelectorOperator = { In: 'In', NotIn: 'NotIn', Exists: 'Exists', DoesNotExist: 'DoesNotExist' } as const;
export type SelectorOperator = (typeof SelectorOperator)[keyof typeof SelectorOperator];

export interface LabelSelectorRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values?: readonly string[];
}

/** A metav1.LabelSelector. */
export interface LabelSelector {
  readonly matchLabels?: Labels;
  readonly matchExpressions?: readonly LabelSelectorRequirement[];
}

/** An admissionregistration/v1 RuleWithOperations. */
export interface WebhookRule {
  readonly operations?: readonly string[];
  readonly apiGroups?: readonly string[];
  readonly apiVersions?: readonly string[];
  readonly resources?: readonly string[];
  readonly scope?: string;
}

/** The part of one webhook of a Mutating- or ValidatingWebhookConfiguration that routing reads. */
export interface Webhook {
  readonly name: string;
  readonly clientConfig: {
    readonly service?: { readonly name: string; readonly namespace: string; readonly path?: string; readonly port?: number };
    readonly url?: string;
  };
  readonly rules?: readonly WebhookRule[];
  readonly namespaceSelector?: LabelSelector;
  readonly objectSelector?: LabelSelector;
  readonly failurePolicy?: string;
}

/** An admissionregistration/v1 Mutating- or ValidatingWebhookConfiguration, as far as routing goes. */
export interface WebhookConfiguration {
  readonly kind: 'MutatingWebhookConfiguration' | 'ValidatingWebhookConfiguration';
  readonly metadata: { readonly name: string };
  readonly webhooks?: readonly Webhook[];
}

/**
 * Kubernetes' metadata limits (apimachinery pkg/api/validation/objectmeta.go and
 * pkg/util/validation/validation.go). The apiserver validates a pod only after the mutating
 * webhooks, so a pod over them reaches the injector, and one the injection takes over them is
 * refused after admission.
 */
export const MetadataLimits = {
  /** TotalAnnotationSizeLimitB: keys plus values, in bytes. */
  annotationBytes: 256 * 1024,
  /** qualifiedNameMaxLength: the name part of a label or annotation key. */
  keyName: 63,
  /** DNS1123SubdomainMaxLength: the optional prefix before the `/`. */
  keyPrefix: 253,
  /** LabelValueMaxLength. */
  labelValue: LABEL_VALUE_MAX_LENGTH,
} as const;
