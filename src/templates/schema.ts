// Only the generated models: the package's index also loads the API clients and their HTTP stack,
// about 90 MiB more resident memory in every server (issue 11: RSS under the Deployment's 256 MiB).
import * as k8s from '@kubernetes/client-node/dist/gen/models/all.js';

/**
 * JSON Schema of a SidecarTemplate document, composed from the real core/v1 definitions.
 *
 * The shape of every core/v1 object a template may hold (Container with its probes, lifecycle,
 * securityContext, resources...; Volume with every source; EnvVar; VolumeMount) is generated here,
 * once at load, from the model metadata of @kubernetes/client-node (a runtime dependency already;
 * its models are generated from the Kubernetes OpenAPI definitions of the release it targets): each
 * definition lists its fields and their types, so every field at every depth is known and an unknown
 * one is refused. The OpenAPI `required` lists and enums are checked by kubernetes-models'
 * validators (see coreValidators in load.ts). What neither expresses, because the apiserver checks
 * it in Go (pkg/apis/core/validation), is added below as VALUE_RULES: file modes, ports, names,
 * quantities.
 */

/** resource.Quantity: a number with an optional binary, decimal or exponent suffix. */
export const QUANTITY_PATTERN = '^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$';
/** Label and annotation keys: an optional DNS subdomain prefix and a name of at most 63 characters. */
const QUALIFIED_NAME = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$';

/** The fields a pod may override through `<template>.sidecar-injector.io/<field>` annotations. */
export const Overridable = ['image', 'cpu', 'memory'] as const;
export type OverrideField = (typeof Overridable)[number];

/**
 * Formats checked on strings, with the rule they come from; load.ts registers them with ajv and
 * words their failures (FormatMessages).
 */
export const Formats = {
  // IsDNS1123Label (apimachinery validation.go): container, volume and mount names.
  'dns1123-label': /^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
  // IsDNS1123Subdomain: template names.
  'dns1123-subdomain': /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
  // IsValidPortName (IANA_SVC_NAME): at most 15 characters, a-z0-9 and '-', at least one letter, no '--', no '-' at the ends.
  'iana-svc-name': /^(?=.{1,15}$)(?=.*[a-z])(?!.*--)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
  // Non-negative resource.Quantity (ValidateNonnegativeQuantity).
  quantity: /^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$/,
  // IsEnvVarName since RelaxedEnvironmentVariableValidation (GA in 1.34): printable ASCII except '='.
  'env-var-name': /^[\x20-\x3c\x3e-\x7e]+$/,
} as const;
export type Format = keyof typeof Formats;

export const FormatMessages: Readonly<Record<Format, string>> = {
  'dns1123-label': 'must be a DNS-1123 label: at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit',
  'dns1123-subdomain': 'must be a DNS-1123 subdomain: lowercase letters, digits, "-" and ".", at most 253 characters',
  'iana-svc-name': 'must be a port name (IANA_SVC_NAME): at most 15 lowercase letters, digits and "-", with at least one letter, no "--" and no "-" at either end',
  quantity: 'must be a non-negative quantity such as 100m, 0.5, 128Mi or 1Gi',
  'env-var-name': 'must be printable ASCII characters other than "="',
};

type Schema = Record<string, unknown>;

const port = (min: number): Schema => ({ type: ['integer', 'null'], minimum: min, maximum: 65535 });
const portOrName: Schema = { type: ['integer', 'string'], minimum: 1, maximum: 65535, format: 'iana-svc-name' };
// ValidateFileMode / validateVolumeSourceMode: 0 to 0777; written in octal in YAML 1.1 (0644).
const fileMode: Schema = { type: ['integer', 'null'], minimum: 0, maximum: 0o777 };
const quantity: Schema = { type: ['string', 'number', 'null'], format: 'quantity', minimum: 0 };
const quantities: Schema = { type: ['object', 'null'], additionalProperties: quantity };
const named = (format: Format): Schema => ({ type: 'string', format });

/** Rules of pkg/apis/core/validation that the OpenAPI definitions do not carry, by `Definition.field`. */
const VALUE_RULES: Readonly<Record<string, Schema>> = {
  'V1Container.name': named('dns1123-label'),
  // The API requires an image on every container of a pod (validateContainers: "image: Required value").
  'V1Container.image': { type: 'string', minLength: 1 },
  // A template's containers are regular or native sidecars: only restartPolicy Always is meaningful.
  'V1Container.restartPolicy': { enum: ['Always', null] },
  'V1Volume.name': named('dns1123-label'),
  'V1VolumeMount.name': named('dns1123-label'),
  'V1VolumeMount.mountPath': { type: 'string', minLength: 1 },
  'V1EnvVar.name': named('env-var-name'),
  'V1ContainerPort.containerPort': port(1),
  'V1ContainerPort.hostPort': port(0),
  'V1ContainerPort.name': { type: ['string', 'null'], format: 'iana-svc-name' },
  'V1HTTPGetAction.port': portOrName,
  'V1TCPSocketAction.port': portOrName,
  'V1GRPCAction.port': port(1),
  'V1SecretVolumeSource.defaultMode': fileMode,
  'V1ConfigMapVolumeSource.defaultMode': fileMode,
  'V1ProjectedVolumeSource.defaultMode': fileMode,
  'V1DownwardAPIVolumeSource.defaultMode': fileMode,
  'V1KeyToPath.mode': fileMode,
  'V1DownwardAPIVolumeFile.mode': fileMode,
  'V1ResourceRequirements.limits': quantities,
  'V1ResourceRequirements.requests': quantities,
  'V1VolumeResourceRequirements.limits': quantities,
  'V1VolumeResourceRequirements.requests': quantities,
  'V1EmptyDirVolumeSource.sizeLimit': quantity,
  'V1ResourceFieldSelector.divisor': quantity,
};

interface Attribute {
  readonly name: string;
  readonly baseName: string;
  readonly type: string;
  readonly format: string;
}

type ModelClass = { getAttributeTypeMap(): readonly Attribute[] };

function modelClass(name: string): ModelClass | undefined {
  const c = (k8s as unknown as Record<string, unknown>)[name];
  return typeof c === 'function' && 'getAttributeTypeMap' in c ? (c as unknown as ModelClass) : undefined;
}

/** The JSON Schema of one field type of the generated models (`Array<V1EnvVar>`, `IntOrString`, ...). */
function typeSchema(type: string, format: string, defs: Map<string, Schema>): Schema {
  const array = /^Array<(.+)>$/.exec(type);
  if (array) return { type: ['array', 'null'], items: typeSchema(array[1]!, format, defs) };
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return { type: ['object', 'null'], additionalProperties: typeSchema(map[1]!, format, defs) };
  if (type === 'string' || type === 'Date') return { type: ['string', 'null'] };
  if (type === 'boolean') return { type: ['boolean', 'null'] };
  if (type === 'number') return { type: [format === 'int32' || format === 'int64' ? 'integer' : 'number', 'null'] };
  if (type === 'IntOrString') return { type: ['integer', 'string', 'null'] };
  if (modelClass(type) === undefined) return {}; // `any` (free-form JSON, e.g. ObjectMeta extensions)
  define(type, defs);
  return { $ref: `#/$defs/${type}` };
}

/** Adds a model and every model it refers to, each with exactly the fields it has. */
function define(name: string, defs: Map<string, Schema>): void {
  if (defs.has(name)) return;
  const properties: Record<string, Schema> = {};
  defs.set(name, { type: ['object', 'null'], additionalProperties: false, properties });
  for (const a of modelClass(name)!.getAttributeTypeMap()) {
    properties[a.baseName] = VALUE_RULES[`${name}.${a.baseName}`] ?? typeSchema(a.type, a.format, defs);
  }
}

/** The core/v1 definitions a template uses, and everything they refer to, as `$defs`. */
function coreDefinitions(): Record<string, Schema> {
  const defs = new Map<string, Schema>();
  for (const name of ['V1Container', 'V1Volume', 'V1EnvVar', 'V1VolumeMount', 'V1LocalObjectReference']) define(name, defs);
  return Object.fromEntries(defs);
}

const stringMap = (keyPattern: string) => ({ type: 'object', propertyNames: { pattern: keyPattern, maxLength: 316 }, additionalProperties: { type: 'string' } }) as const;
const list = (definition: string): Schema => ({ type: 'array', items: { $ref: `#/$defs/${definition}`, type: 'object', required: ['name'] } });

/** The schema of a whole SidecarTemplate document. */
export const sidecarTemplateSchema = {
  $defs: coreDefinitions(),
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'sidecar-injector.io/v1alpha1' },
    kind: { const: 'SidecarTemplate' },
    metadata: {
      type: 'object',
      required: ['name'],
      properties: {
        name: named('dns1123-subdomain'),
        labels: { type: 'object' },
        annotations: { type: 'object' },
      },
    },
    spec: {
      type: 'object',
      additionalProperties: false,
      properties: {
        default: { type: 'boolean' },
        // true: native sidecars (init containers with restartPolicy Always); "jobs": only in pods owned by a Job.
        nativeSidecar: { enum: [true, false, 'jobs'] },
        // "first", "last" or {before|after: CONTAINER}; checked by placementFault for a single clear message.
        placement: { type: ['string', 'object'] },
        overrides: { type: 'array', items: { enum: Overridable }, uniqueItems: true },
        containers: { type: 'array', items: { $ref: '#/$defs/V1Container', type: 'object', required: ['name', 'image'] } },
        initContainers: { type: 'array', items: { $ref: '#/$defs/V1Container', type: 'object', required: ['name', 'image'] } },
        volumes: list('V1Volume'),
        imagePullSecrets: list('V1LocalObjectReference'),
        volumeMounts: { type: 'array', items: { $ref: '#/$defs/V1VolumeMount', type: 'object', required: ['name', 'mountPath'] } },
        env: list('V1EnvVar'),
        annotations: stringMap(QUALIFIED_NAME),
        labels: stringMap(QUALIFIED_NAME),
      },
    },
  },
} as const;

/** Volume sources a template may give; a volume with none is an emptyDir (the apiserver's default). */
export function volumeSources(volume: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(volume).filter((k) => k !== 'name' && volume[k] !== null && volume[k] !== undefined);
}
