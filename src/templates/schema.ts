/**
 * JSON Schema of a SidecarTemplate document. Container, volume and env shapes follow core/v1 closely
 * enough to catch what breaks a pod at admission (wrong types, missing names, misspelled fields),
 * so a template fault is reported when it loads, not when a user's pod is rejected.
 */

const DNS1123_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
const DNS1123_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/** resource.Quantity: a number with an optional binary, decimal or exponent suffix. */
export const QUANTITY_PATTERN = '^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$';
/** Label and annotation keys: an optional DNS subdomain prefix and a name of at most 63 characters. */
const QUALIFIED_NAME = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$';

/** The fields a pod may override through `<template>.sidecar-injector.io/<field>` annotations. */
export const Overridable = ['image', 'cpu', 'memory'] as const;
export type OverrideField = (typeof Overridable)[number];

const stringArray = { type: 'array', items: { type: 'string' } } as const;
const quantity = { anyOf: [{ type: 'string', pattern: QUANTITY_PATTERN }, { type: 'number', minimum: 0 }] } as const;
const quantityMap = { type: 'object', additionalProperties: quantity } as const;

const envVar = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1 },
    value: { type: 'string' },
    valueFrom: { type: 'object' },
  },
} as const;

const volumeMount = {
  type: 'object',
  required: ['name', 'mountPath'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: DNS1123_LABEL, maxLength: 63 },
    mountPath: { type: 'string', minLength: 1 },
    readOnly: { type: 'boolean' },
    recursiveReadOnly: { enum: ['Disabled', 'IfPossible', 'Enabled'] },
    subPath: { type: 'string' },
    subPathExpr: { type: 'string' },
    mountPropagation: { enum: ['None', 'HostToContainer', 'Bidirectional'] },
  },
} as const;

const containerPort = {
  type: 'object',
  required: ['containerPort'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: '^(?=.*[a-z])[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 15 },
    containerPort: { type: 'integer', minimum: 1, maximum: 65535 },
    hostPort: { type: 'integer', minimum: 1, maximum: 65535 },
    hostIP: { type: 'string' },
    protocol: { enum: ['TCP', 'UDP', 'SCTP'] },
  },
} as const;

/** core/v1 Container: every field the API knows, so a misspelled one is an error. */
export const containerSchema = {
  type: 'object',
  required: ['name', 'image'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: DNS1123_LABEL, maxLength: 63 },
    image: { type: 'string', minLength: 1 },
    command: stringArray,
    args: stringArray,
    workingDir: { type: 'string' },
    ports: { type: 'array', items: containerPort },
    envFrom: { type: 'array', items: { type: 'object' } },
    env: { type: 'array', items: envVar },
    resources: {
      type: 'object',
      additionalProperties: false,
      properties: { limits: quantityMap, requests: quantityMap, claims: { type: 'array' } },
    },
    resizePolicy: { type: 'array', items: { type: 'object' } },
    restartPolicy: { enum: ['Always'] },
    restartPolicyRules: { type: 'array' },
    volumeMounts: { type: 'array', items: volumeMount },
    volumeDevices: { type: 'array', items: { type: 'object' } },
    livenessProbe: { type: 'object' },
    readinessProbe: { type: 'object' },
    startupProbe: { type: 'object' },
    lifecycle: { type: 'object' },
    terminationMessagePath: { type: 'string' },
    terminationMessagePolicy: { enum: ['File', 'FallbackToLogsOnError'] },
    imagePullPolicy: { enum: ['Always', 'Never', 'IfNotPresent'] },
    securityContext: { type: 'object' },
    stdin: { type: 'boolean' },
    stdinOnce: { type: 'boolean' },
    tty: { type: 'boolean' },
  },
} as const;

const volume = {
  type: 'object',
  required: ['name'],
  properties: { name: { type: 'string', pattern: DNS1123_LABEL, maxLength: 63 } },
  // A volume has its name and exactly one source (emptyDir, configMap, secret, ...).
  minProperties: 2,
  maxProperties: 2,
  additionalProperties: { type: 'object' },
} as const;

const stringMap = (keyPattern: string) =>
  ({ type: 'object', propertyNames: { pattern: keyPattern, maxLength: 316 }, additionalProperties: { type: 'string' } }) as const;

/** The schema of a whole SidecarTemplate document. */
export const sidecarTemplateSchema = {
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
        name: { type: 'string', pattern: DNS1123_SUBDOMAIN, maxLength: 253 },
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
        containers: { type: 'array', items: containerSchema },
        initContainers: { type: 'array', items: containerSchema },
        volumes: { type: 'array', items: volume },
        imagePullSecrets: {
          type: 'array',
          items: { type: 'object', required: ['name'], additionalProperties: false, properties: { name: { type: 'string', minLength: 1 } } },
        },
        volumeMounts: { type: 'array', items: volumeMount },
        env: { type: 'array', items: envVar },
        annotations: stringMap(QUALIFIED_NAME),
        labels: stringMap(QUALIFIED_NAME),
      },
    },
  },
} as const;
