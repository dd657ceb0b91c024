/**
 * Generates three files the server reads instead of compiling anything at start, and the chart's
 * values schema:
 *
 * src/generated/core-v1.ts, the JSON Schema of the core/v1 definitions a template may hold
 * (Container, Volume, EnvVar, VolumeMount, LocalObjectReference and everything they refer to), so
 * the server reads a committed file instead of importing @kubernetes/client-node (~60 MB, seconds of
 * start-up) and kubernetes-models at run time. Built from the same sources the loader used to read
 * at run time:
 * - @kubernetes/client-node's generated models: every field of each definition and its type;
 * - kubernetes-models' validators (compiled from the Kubernetes OpenAPI v3 definitions): the
 *   `required` lists and enums. They ship as compiled code, not schema objects, so each is read by
 *   validating probe values: `{}` where a definition sits gives its missing required fields, a
 *   string no enum holds in a field gives its allowed values.
 *
 * src/generated/template-validator.ts, ajv's standalone code for the whole template schema
 * (sidecarTemplateSchema of src/templates/schema.ts over those definitions): compiling it at start
 * took ~0.5 s of CPU and ~16 MB; importing the generated code takes ~50 ms and ~2 MB.
 *
 * src/generated/config-validator.ts, ajv's standalone code for the configuration (configSchema of
 * src/config/config.ts, the settings' table): compiling it at start loaded ajv's compiler into
 * every process, ~3.5 MB of the server's RSS.
 *
 * charts/sidecar-injector/values.schema.json, the chart's values schema (scripts/chart-schema.ts),
 * which holds the template schema and the --image-mirror rule, so Helm refuses at render time the
 * values the server would refuse at start.
 *
 *   npm run schema              # write it
 *   npm run schema -- --check   # exit 1 when it is out of date
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { Ajv } from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { Container } from 'kubernetes-models/v1/Container';
import { EnvVar } from 'kubernetes-models/v1/EnvVar';
import { LocalObjectReference } from 'kubernetes-models/v1/LocalObjectReference';
import { Volume } from 'kubernetes-models/v1/Volume';
import { VolumeMount } from 'kubernetes-models/v1/VolumeMount';
import { stringify } from 'yaml';
import { configSchema } from '../src/config/config.js';
import { chartValuesSchema } from './chart-schema.js';
import type { CoreDefinition } from '../src/generated/core-v1.js';
import { Formats, sidecarTemplateSchema } from '../src/templates/schema.js';

type Schema = Record<string, unknown>;

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CORE_V1_TS = join(ROOT, 'src', 'generated', 'core-v1.ts');
export const TEMPLATE_VALIDATOR_TS = join(ROOT, 'src', 'generated', 'template-validator.ts');
export const CONFIG_VALIDATOR_TS = join(ROOT, 'src', 'generated', 'config-validator.ts');
export const CHART_VALUES_SCHEMA = join(ROOT, 'charts', 'sidecar-injector', 'values.schema.json');
/** The SidecarTemplate CRD (issue 23), in the kustomize base and in the chart's crds/. */
export const CRD_YAML = [
  join(ROOT, 'manifests', 'base', 'crds', 'sidecartemplates.yaml'),
  join(ROOT, 'charts', 'sidecar-injector', 'crds', 'sidecartemplates.yaml'),
];

/** A kubernetes-models class: its validate() throws with ajv errors when a value breaks the OpenAPI definition. */
type CoreModel = new (data: unknown) => { validate(): void };
interface ProbeError {
  readonly keyword: string;
  readonly instancePath: string;
  readonly params: Record<string, unknown>;
}

/** The definitions a template holds directly, with the kubernetes-models class that validates each. */
const ROOTS: Readonly<Record<string, CoreModel>> = {
  V1Container: Container as unknown as CoreModel,
  V1Volume: Volume as unknown as CoreModel,
  V1EnvVar: EnvVar as unknown as CoreModel,
  V1VolumeMount: VolumeMount as unknown as CoreModel,
  V1LocalObjectReference: LocalObjectReference as unknown as CoreModel,
};

/** A string no Kubernetes enum holds: set in a field, the enum check reports the allowed values. */
const NOT_AN_ENUM_VALUE = '\u0000not-an-enum-value';

/**
 * Where a probe value goes: `place(v)` is a root object holding v at `path` (a JSON pointer, as the
 * validators' instancePath writes it).
 */
interface Probe {
  readonly model: CoreModel;
  readonly place: (value: unknown) => unknown;
  readonly path: string;
}

function probeErrors(probe: Probe, value: unknown, keyword: string): ProbeError[] {
  try {
    new probe.model(probe.place(value)).validate();
    return [];
  } catch (err) {
    const errors = (err as { errors?: unknown }).errors;
    if (!Array.isArray(errors)) throw err;
    return (errors as ProbeError[]).filter((e) => e.keyword === keyword && e.instancePath === probe.path);
  }
}

interface Attribute {
  readonly baseName: string;
  readonly type: string;
  readonly format: string;
}

type ModelClass = { getAttributeTypeMap(): readonly Attribute[] };

function modelClass(name: string): ModelClass | undefined {
  const c = (k8s as unknown as Record<string, unknown>)[name];
  return typeof c === 'function' && 'getAttributeTypeMap' in c ? (c as unknown as ModelClass) : undefined;
}

const inside = (probe: Probe, key: string, wrap: (value: unknown) => unknown): Probe => ({
  model: probe.model,
  place: (v) => probe.place(wrap(v)),
  path: `${probe.path}/${key}`,
});

/** The JSON Schema of one field type of the generated models (`Array<V1EnvVar>`, `IntOrString`, ...). */
function typeSchema(type: string, format: string, probe: Probe, defs: Map<string, Schema>): Schema {
  const array = /^Array<(.+)>$/.exec(type);
  if (array)
    return {
      type: ['array', 'null'],
      items: typeSchema(
        array[1]!,
        format,
        inside(probe, '0', (v) => [v]),
        defs,
      ),
    };
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map)
    return {
      type: ['object', 'null'],
      additionalProperties: typeSchema(
        map[1]!,
        format,
        inside(probe, 'key', (v) => ({ key: v })),
        defs,
      ),
    };
  if (modelClass(type) !== undefined) {
    define(type, probe, defs);
    return { $ref: `#/$defs/${type}` };
  }
  const enumError = probeErrors(probe, NOT_AN_ENUM_VALUE, 'enum')[0];
  // Kubernetes reads null as "not set", so null passes wherever a value may be left out.
  const values = enumError === undefined ? {} : { enum: [...(enumError.params['allowedValues'] as unknown[]), null] };
  if (type === 'string' || type === 'Date') return { type: ['string', 'null'], ...values };
  if (type === 'boolean') return { type: ['boolean', 'null'], ...values };
  if (type === 'number') return { type: [format === 'int32' || format === 'int64' ? 'integer' : 'number', 'null'], ...values };
  if (type === 'IntOrString') return { type: ['integer', 'string', 'null'], ...values };
  return { ...values }; // `any` (free-form JSON, e.g. FieldsV1)
}

/** Adds a model and every model it refers to, each with exactly the fields it has and the ones it requires. */
function define(name: string, probe: Probe, defs: Map<string, Schema>): void {
  if (defs.has(name)) return;
  const properties: Record<string, Schema> = {};
  const definition: Schema = { type: ['object', 'null'], additionalProperties: false, properties };
  defs.set(name, definition);
  const required = probeErrors(probe, {}, 'required').map((e) => String(e.params['missingProperty']));
  for (const a of modelClass(name)!.getAttributeTypeMap()) {
    properties[a.baseName] = typeSchema(
      a.type,
      a.format,
      inside(probe, a.baseName, (v) => ({ [a.baseName]: v })),
      defs,
    );
  }
  const unknown = required.filter((field) => !(field in properties));
  // A field the OpenAPI definition requires but the models do not have could never be given.
  if (unknown.length > 0) throw new Error(`${name} requires ${unknown.join(', ')}, which @kubernetes/client-node's model does not have`);
  if (required.length > 0) definition['required'] = required;
}

/** The core/v1 definitions a template uses, and everything they refer to, by client-node model name. */
export function coreDefinitions(): Record<string, Schema> {
  const defs = new Map<string, Schema>();
  for (const [name, model] of Object.entries(ROOTS)) define(name, { model, place: (v) => v, path: '' }, defs);
  return Object.fromEntries(defs);
}

function version(pkg: string): string {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve(pkg));
  for (let d = dir; d !== dirname(d); d = dirname(d)) {
    try {
      const json = JSON.parse(readFileSync(join(d, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (json.name === pkg) return json.version ?? '?';
    } catch {
      // No package.json at this level: look one folder up.
    }
  }
  return '?';
}

/** The text of src/generated/core-v1.ts. */
export function coreV1Module(core: Readonly<Record<string, object>> = coreDefinitions()): string {
  return [
    `// Generated by \`npm run schema\` (scripts/render-schema.ts) from @kubernetes/client-node ${version('@kubernetes/client-node')} (fields, types)`,
    `// and kubernetes-models ${version('kubernetes-models')} (required fields, enums). Never edited by hand: run \`npm run schema\`;`,
    '// `npm run lint` and test/scripts/render-schema.test.ts check it is current.',
    '',
    '/** A core/v1 definition as JSON Schema: exactly the fields it has, their types, the ones it requires. */',
    'export interface CoreDefinition {',
    "  readonly type: readonly ['object', 'null'];",
    '  readonly additionalProperties: false;',
    '  readonly required?: readonly string[];',
    '  readonly properties: Readonly<Record<string, Readonly<Record<string, unknown>>>>;',
    '}',
    '',
    '/** Container, Volume, EnvVar, VolumeMount, LocalObjectReference and every definition they refer to. */',
    `export const CORE_V1_DEFINITIONS: Readonly<Record<string, CoreDefinition>> = ${JSON.stringify(core, null, 2)};`,
    '',
  ].join('\n');
}

/**
 * The text of src/generated/template-validator.ts: the template schema over `core` compiled to code.
 * `allErrors` reports every fault of a template at once; `verbose` keeps the failing value and
 * schema on each error, for messages that say what was found and what is allowed (load.ts).
 */
export function templateValidatorModule(core: Readonly<Record<string, CoreDefinition>>): string {
  const ajv = new Ajv({
    allErrors: true,
    strict: true,
    strictRequired: false,
    allowUnionTypes: true,
    verbose: true,
    code: { source: true, esm: true, lines: true },
  });
  // Formats are RegExps, which the standalone code inlines as literals: the module imports nothing of ours.
  for (const [name, pattern] of Object.entries(Formats)) ajv.addFormat(name, pattern);
  const code = standaloneCode.default(ajv, ajv.compile(sidecarTemplateSchema(core)));
  return [
    '// Generated by `npm run schema` (scripts/render-schema.ts): ajv standalone code of sidecarTemplateSchema()',
    '// (src/templates/schema.ts) over src/generated/core-v1.ts. Never edited by hand: change schema.ts and run',
    '// `npm run schema`; `npm run lint` and test/scripts/render-schema.test.ts check it is current.',
    '// @ts-nocheck',
    "import { createRequire } from 'node:module';",
    '',
    // ajv's ESM output still loads its runtime helpers (deep equality, UTF-16 length) with require().
    'const require = createRequire(import.meta.url);',
    code.replace(/^"use strict";\s*/, ''),
    '',
  ].join('\n');
}

/**
 * The text of src/generated/config-validator.ts: configSchema() compiled to code with the options the
 * configuration is checked with: `useDefaults` fills each unset setting, `coerceTypes` turns a
 * flag's or variable's text into an integer, `allErrors` names every invalid setting at once.
 */
export function configValidatorModule(): string {
  const ajv = new Ajv({ useDefaults: true, coerceTypes: true, allErrors: true, code: { source: true, esm: true, lines: true } });
  const code = standaloneCode.default(ajv, ajv.compile(configSchema()));
  return [
    '// Generated by `npm run schema` (scripts/render-schema.ts): ajv standalone code of configSchema()',
    "// (src/config/config.ts). Never edited by hand: change the settings' table and run `npm run schema`;",
    '// `npm run lint` and test/scripts/render-schema.test.ts check it is current.',
    '// @ts-nocheck',
    "import { createRequire } from 'node:module';",
    '',
    // ajv's ESM output still loads its runtime helper (UTF-16 length, for minLength) with require().
    'const require = createRequire(import.meta.url);',
    code.replace(/^"use strict";\s*/, ''),
    '',
  ].join('\n');
}

/**
 * The template schema as a CRD's structural OpenAPI v3 schema, so the API server refuses what the
 * loader would (mostly: the loader still checks every object) and `kubectl explain` describes each
 * field. Structural schemas take no $ref (inlined), no type lists (`nullable`, int-or-string, or
 * preserve-unknown-fields for a bool-or-string), no const, propertyNames, uniqueItems or custom
 * formats (dropped: the loader keeps checking them), and no schema of metadata beyond its type.
 * Unknown fields are not listed as refused: the API server refuses them itself on `kubectl apply`
 * (strict field validation) with their path.
 */
export function crdSchema(schema: Schema, defs: Readonly<Record<string, Schema>>, depth = 0): Schema {
  if (depth > 40) throw new Error('crdSchema: the template schema nests too deep (a $ref cycle?)');
  const ref = schema['$ref'];
  if (typeof ref === 'string') {
    const { $ref: _ref, ...rest } = schema;
    return crdSchema({ ...defs[ref.replace('#/$defs/', '')], ...rest }, defs, depth + 1);
  }
  const out: Schema = {};
  const types = ('const' in schema ? [typeof schema['const']] : [schema['type']].flat()).filter((t): t is string => typeof t === 'string');
  const kinds = types.filter((t) => t !== 'null');
  if (types.includes('null')) out['nullable'] = true;
  const values = Array.isArray(schema['enum']) ? (schema['enum'] as unknown[]).filter((v) => v !== null) : 'const' in schema ? [schema['const']] : undefined;
  const enumKinds = new Set(values?.map((v) => typeof v));
  if (kinds.length === 1) out['type'] = kinds[0] === 'number' && types.length === 1 ? 'number' : kinds[0];
  else if (kinds.length === 2 && kinds.includes('string') && (kinds.includes('integer') || kinds.includes('number'))) out['x-kubernetes-int-or-string'] = true;
  else if (kinds.length === 0 && enumKinds.size === 1) out['type'] = [...enumKinds][0];
  else out['x-kubernetes-preserve-unknown-fields'] = true;
  if (values !== undefined && enumKinds.size === 1) out['enum'] = values;
  if (values !== undefined && enumKinds.size > 1) out['x-kubernetes-preserve-unknown-fields'] = true;
  for (const k of ['minimum', 'maximum', 'minLength', 'maxLength', 'pattern', 'required', 'description'] as const)
    if (k in schema && out['type'] !== undefined) out[k] = schema[k];
  if (out['type'] !== 'string') delete out['pattern'];
  const properties = schema['properties'] as Record<string, Schema> | undefined;
  if (properties !== undefined) out['properties'] = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, crdSchema(v, defs, depth + 1)]));
  const additional = schema['additionalProperties'];
  if (typeof additional === 'object' && additional !== null) out['additionalProperties'] = crdSchema(additional as Schema, defs, depth + 1);
  const items = schema['items'];
  if (typeof items === 'object' && items !== null) out['items'] = crdSchema(items as Schema, defs, depth + 1);
  boundSize(out, schema);
  // A node of several kinds (a boolean or an object) is kept as written, its fields unlisted.
  if (out['type'] === undefined) for (const k of ['properties', 'additionalProperties', 'items']) delete out[k];
  // An object whose fields are not listed keeps them (labels, annotations: maps of strings).
  if (out['type'] === 'object' && properties === undefined && out['additionalProperties'] === undefined) out['x-kubernetes-preserve-unknown-fields'] = true;
  return out;
}

/**
 * Bounds on every field that can grow, so the API server refuses at write time what no sidecar
 * needs (the largest real-world sidecar of test/fixtures/corpus/sidecars has 30 env vars, 20 args
 * and strings under 2 KB; test/manifests/crd.test.ts checks every bundled and corpus template still
 * fits). The schema's own bounds stand where it has them. The injector still refuses an object over
 * its own byte limit (MAX_OBJECT_BYTES in src/templates/cluster.ts): CEL has no size of a whole
 * object, and a rule summing its strings would cost more than the API server's CRD budget allows.
 */
export const CrdBounds = { maxLength: 32 * 1024, maxItems: 256, maxProperties: 128 } as const;

function boundSize(out: Schema, schema: Schema): void {
  if (out['type'] === 'string' && out['enum'] === undefined) out['maxLength'] = schema['maxLength'] ?? CrdBounds.maxLength;
  if (out['type'] === 'array') out['maxItems'] = schema['maxItems'] ?? CrdBounds.maxItems;
  if (out['type'] === 'object' && schema['additionalProperties'] !== undefined && schema['additionalProperties'] !== false)
    out['maxProperties'] = schema['maxProperties'] ?? CrdBounds.maxProperties;
}

/** The text of the SidecarTemplate CustomResourceDefinition, its schema from sidecarTemplateSchema(). */
export function crdYaml(core: Readonly<Record<string, CoreDefinition>>): string {
  const schema = sidecarTemplateSchema(core) as unknown as Schema;
  const defs = schema['$defs'] as Record<string, Schema>;
  const spec = crdSchema((schema['properties'] as Record<string, Schema>)['spec']!, defs);
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'sidecartemplates.sidecar-injector.io', labels: { 'app.kubernetes.io/name': 'sidecar-injector' } },
    spec: {
      group: 'sidecar-injector.io',
      scope: 'Namespaced',
      names: { kind: 'SidecarTemplate', listKind: 'SidecarTemplateList', plural: 'sidecartemplates', singular: 'sidecartemplate', shortNames: ['sct'] },
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: 'Default', type: 'boolean', jsonPath: '.spec.default' },
            { name: 'Native', type: 'string', jsonPath: '.spec.nativeSidecar' },
            { name: 'Containers', type: 'string', jsonPath: '.spec.containers[*].name' },
            { name: 'Loaded', type: 'string', jsonPath: ".status.conditions[?(@.type=='Loaded')].status" },
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description:
                "Sidecars, volumes and settings the injector adds to the pods that name this template (or to every opted-in pod, for a default one). A template in the injector's namespace applies to every namespace; one in another namespace to that namespace's pods only.",
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: { ...spec, description: 'What the template injects: the fields of docs/templates.md.' },
                status: {
                  type: 'object',
                  description: 'Whether the injector serves this generation of the template, and why not.',
                  properties: {
                    observedGeneration: { type: 'integer' },
                    conditions: {
                      type: 'array',
                      items: {
                        type: 'object',
                        required: ['type', 'status'],
                        properties: {
                          type: { type: 'string' },
                          status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
                          reason: { type: 'string' },
                          message: { type: 'string' },
                          observedGeneration: { type: 'integer' },
                          lastTransitionTime: { type: 'string', format: 'date-time' },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
  return [
    '# Generated by `npm run schema` (scripts/render-schema.ts) from sidecarTemplateSchema() (src/templates/schema.ts). Do not edit.',
    stringify(crd, { lineWidth: 0 }),
  ].join('\n');
}

/** Every generated file's wanted text, by path. */
export function generated(): Map<string, string> {
  const core = coreDefinitions() as unknown as Record<string, CoreDefinition>;
  return new Map([
    [CORE_V1_TS, coreV1Module(core)],
    [TEMPLATE_VALIDATOR_TS, templateValidatorModule(core)],
    [CONFIG_VALIDATOR_TS, configValidatorModule()],
    [CHART_VALUES_SCHEMA, `${JSON.stringify(chartValuesSchema(core), null, 2)}\n`],
    ...CRD_YAML.map((path) => [path, crdYaml(core)] as [string, string]),
  ]);
}

function main(argv: readonly string[]): number {
  const files = generated();
  if (argv.includes('--check')) {
    const stale = [...files].filter(([path, text]) => {
      try {
        return readFileSync(path, 'utf8') !== text;
      } catch {
        return true;
      }
    });
    if (stale.length === 0) return 0;
    process.stderr.write(`${stale.map(([path]) => `${path.slice(ROOT.length + 1)} is out of date`).join('\n')}\nrun: npm run schema\n`);
    return 1;
  }
  for (const [path, text] of files) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
    process.stdout.write(`wrote ${path.slice(ROOT.length + 1)}\n`);
  }
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
