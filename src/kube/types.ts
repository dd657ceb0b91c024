/**
 * The small structural view of core/v1 objects the injector reads. Pods arrive as parsed JSON, so
 * every field is optional and everything not named here is carried through untouched.
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

export interface ObjectMeta extends JsonObject {
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
