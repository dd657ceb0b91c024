import { CORE_V1_DEFINITIONS, type CoreDefinition } from '../generated/core-v1.js';

/**
 * JSON Schema of a SidecarTemplate document, composed from the real core/v1 definitions.
 *
 * The shape of every core/v1 object a template may hold (Container with its probes, lifecycle,
 * securityContext, resources...; Volume with every source; EnvVar; VolumeMount) comes from
 * core-v1.ts, generated at development time by `npm run schema` (scripts/render-schema.ts) from
 * @kubernetes/client-node's models (every field at every depth and its type, so an unknown one is
 * refused) and kubernetes-models' validators (the OpenAPI `required` lists and enums). Neither
 * library is imported at run time: client-node alone costs ~60 MB and seconds of start-up. What the
 * OpenAPI definitions do not express, because the apiserver checks it in Go
 * (pkg/apis/core/validation), is added below as VALUE_RULES: file modes, ports, names, quantities.
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

/**
 * The generated core/v1 definitions with VALUE_RULES in place of the fields they name. A rule
 * replaces the field's generated schema whole, so it must not drop an enum the OpenAPI definition
 * gives; a rule naming no generated field is a mistake (both caught when the module loads, by every test).
 */
export function coreDefinitions(generated: Readonly<Record<string, CoreDefinition>> = CORE_V1_DEFINITIONS, rules: Readonly<Record<string, Schema>> = VALUE_RULES): Record<string, Schema> {
  const defs: Record<string, Schema> = {};
  for (const [name, definition] of Object.entries(generated)) defs[name] = { ...definition, properties: { ...definition.properties } };
  for (const [at, rule] of Object.entries(rules)) {
    const [name, field] = at.split('.') as [string, string];
    const current = generated[name]?.properties[field];
    if (current === undefined) throw new Error(`VALUE_RULES: ${at} is not a field of the core/v1 definitions (src/generated/core-v1.ts)`);
    if ('enum' in current && !('enum' in rule)) throw new Error(`VALUE_RULES: ${at} would drop the core/v1 enum ${JSON.stringify(current['enum'])}`);
    (defs[name]!['properties'] as Record<string, Schema>)[field] = rule;
  }
  return defs;
}

const stringMap = (keyPattern: string) => ({ type: 'object', propertyNames: { pattern: keyPattern, maxLength: 316 }, additionalProperties: { type: 'string' } }) as const;
const list = (definition: string): Schema => ({ type: 'array', items: { $ref: `#/$defs/${definition}`, type: 'object', required: ['name'] } });

const containerNames: Schema = { type: 'array', items: named('dns1123-label'), uniqueItems: true };

/** A metav1.LabelSelector (required.ts checks which keys and whether the apiserver would take it). */
const labelSelectorSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
    matchExpressions: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['key', 'operator'],
        properties: { key: { type: 'string' }, operator: { enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] }, values: { type: 'array', items: { type: 'string' } } },
      },
    },
  },
};

/** `serviceAccountToken`: true, false, or a serviceAccountToken projection (its values checked by tokenFault in load.ts). */
const serviceAccountTokenSchema: Schema = {
  type: ['boolean', 'object'],
  additionalProperties: false,
  properties: {
    audience: { type: 'string', minLength: 1 },
    expirationSeconds: { type: 'integer' },
    path: { type: 'string', minLength: 1 },
  },
};

/**
 * What ValidateProjectedVolumeSource refuses in a serviceAccountToken projection, for the object
 * form of `serviceAccountToken`: a token valid for less than 10 minutes or more than 2^32 seconds,
 * and a path that is absolute or has a ".." element (validateLocalDescendingPath). [path, message].
 */
export function tokenFault(token: { readonly expirationSeconds?: number; readonly path?: string }): [string, string] | undefined {
  const seconds = token.expirationSeconds;
  if (seconds !== undefined && (seconds < 600 || seconds > 2 ** 32)) return ['expirationSeconds', `must be between 600 (10 minutes, the apiserver's minimum) and 4294967296, got ${seconds}`];
  const path = token.path;
  if (path !== undefined && (path.startsWith('/') || path.split('/').includes('..'))) return ['path', `must be a relative path without "..", got ${JSON.stringify(path)}`];
  return undefined;
}

/**
 * The schema of a whole SidecarTemplate document, over the given core/v1 definitions. Compiled by
 * `npm run schema` into template-validator.ts (ajv standalone code), never at run time: compiling
 * it takes ~0.5 s of CPU and ~16 MB.
 */
export function sidecarTemplateSchema(core: Readonly<Record<string, CoreDefinition>> = CORE_V1_DEFINITIONS) {
  return {
    $defs: coreDefinitions(core),
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
          // true: the pod's own token volume (the ServiceAccount plugin's); an object: a projected token of the template's own.
          // (properties only constrain an object: true and false pass them.)
          serviceAccountToken: serviceAccountTokenSchema,
          appContainers: {
            type: 'object',
            additionalProperties: false,
            properties: { include: containerNames, exclude: containerNames },
          },
          // Present: every opted-in pod of the namespaces the selector takes (all without one) gets the template (required.ts).
          required: {
            type: 'object',
            additionalProperties: false,
            properties: { namespaceSelector: labelSelectorSchema },
          },
        },
      },
    },
  } as const;
}

/** Volume sources a template may give; a volume with none is an emptyDir (the apiserver's default). */
export function volumeSources(volume: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(volume).filter((k) => k !== 'name' && volume[k] !== null && volume[k] !== undefined);
}
