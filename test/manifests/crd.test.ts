import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parseAllDocuments } from 'yaml';
import { TemplateSetError } from '../../src/errors.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import { parseKubectl } from '../../src/yaml/kubectl.js';

/**
 * The SidecarTemplate CRD (issue 23) against the templates the injector serves. No API server runs
 * here, so the two checks it makes of a custom object are done as it documents them: the
 * openAPIV3Schema's types and enums (a JSON Schema; Ajv), and strict field validation (kubectl's
 * default since 1.27), which refuses a field the structural schema does not declare, by its path,
 * unless a node preserves unknown fields.
 */
const crd = parseAllDocuments(readFileSync('manifests/base/crds/sidecartemplates.yaml', 'utf8'))[0]!.toJS();
const schema = crd.spec.versions[0].schema.openAPIV3Schema;
const validateTypes = new Ajv({ strict: false, allErrors: true, logger: false }).compile(asJsonSchema(schema) as object);

/** OpenAPI's `nullable` and Kubernetes' int-or-string as plain JSON Schema, for Ajv. */
function asJsonSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(asJsonSchema);
  if (node === null || typeof node !== 'object') return node;
  const { nullable, ...rest } = node as Record<string, unknown>;
  const out = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, asJsonSchema(s)])) : asJsonSchema(v)]));
  if (out['x-kubernetes-int-or-string'] === true) out['anyOf'] = [{ type: 'integer' }, { type: 'string' }];
  if (nullable === true && typeof out['type'] === 'string') out['type'] = [out['type'], 'null'];
  return out;
}

type Node = { properties?: Record<string, Node>; additionalProperties?: Node | boolean; items?: Node; 'x-kubernetes-preserve-unknown-fields'?: boolean; type?: string };

/** The fields strict field validation refuses, as the API server names them (`.spec.contaners`). */
function unknownFields(value: unknown, node: Node, path = ''): string[] {
  if (node['x-kubernetes-preserve-unknown-fields'] === true || value === null || typeof value !== 'object') return [];
  if (Array.isArray(value)) return node.items === undefined ? [] : value.flatMap((v, i) => unknownFields(v, node.items!, `${path}[${i}]`));
  return Object.entries(value).flatMap(([key, v]) => {
    const child = node.properties?.[key] ?? (typeof node.additionalProperties === 'object' ? node.additionalProperties : undefined);
    if (child === undefined) return node.properties === undefined && node.type === 'object' && node.additionalProperties === undefined ? [] : [`${path}.${key}`];
    return unknownFields(v, child, `${path}.${key}`);
  });
}

/** What the API server would say of `obj` (metadata aside: it checks ObjectMeta itself). */
function apiServerFaults(obj: Record<string, unknown>): string[] {
  const body = { ...obj, metadata: {} };
  const types = validateTypes(body) ? [] : (validateTypes.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
  return [...unknownFields(body, schema).map((f) => `unknown field "${f.slice(1)}"`), ...types];
}

/** Every SidecarTemplate document of the repo's templates and test fixtures (real-world sidecars among them: test/fixtures/corpus/SOURCES.md), read as kubectl reads YAML (1.1: `0775` is octal). */
function templateDocuments(): { file: string; text: string; docs: Record<string, unknown>[] }[] {
  const files = [...readdirSync('templates').map((f) => join('templates', f)), ...(readdirSync('test/fixtures', { recursive: true }) as string[]).map((f) => join('test/fixtures', f))];
  return files
    .filter((f) => f.endsWith('.yaml'))
    .map((file) => ({ file, text: readFileSync(file, 'utf8') }))
    .filter(({ text }) => /^kind: SidecarTemplate/m.test(text))
    .map(({ file, text }) => ({ file, text, docs: parseKubectl(text).map((d) => d.value as Record<string, unknown>).filter((d) => d?.kind === 'SidecarTemplate') }));
}

function loaderAccepts(file: string, text: string): boolean {
  try {
    compileTemplateSet([{ file, text }], file);
    return true;
  } catch (err) {
    if (err instanceof TemplateSetError) return false;
    throw err;
  }
}

describe('the SidecarTemplate CRD schema (issue 23)', () => {
  const all = templateDocuments();

  it('accepts every template the injector loads: the bundled ones and the real-world sidecars', () => {
    const accepted = all.filter(({ file, text }) => loaderAccepts(file, text));
    assert.ok(accepted.length >= 15, `only ${accepted.length} loadable template files found`);
    assert.ok(accepted.some((t) => t.file.includes('corpus/sidecars/istio-proxy')));
    for (const { file, docs } of accepted) for (const doc of docs) assert.deepEqual(apiServerFaults(doc), [], `${file}: ${(doc.metadata as { name?: string })?.name}`);
  });

  it('refuses a misspelt field by its path, and a value of the wrong type', () => {
    const good = all.find((t) => t.file === join('templates', 'proxy.yaml'))!.docs[0]!;
    const spec = good.spec as Record<string, unknown>;
    assert.deepEqual(apiServerFaults({ ...good, spec: { ...spec, contaners: spec.containers } }), ['unknown field "spec.contaners"']);
    const containers = spec.containers as Record<string, unknown>[];
    const typo = { ...good, spec: { ...spec, containers: [{ ...containers[0], imagePullPolicy: 'Sometimes', resoures: {} }] } };
    const faults = apiServerFaults(typo);
    assert.ok(faults.includes('unknown field "spec.containers[0].resoures"'), faults.join('; '));
    assert.ok(faults.some((f) => f.startsWith('/spec/containers/0/imagePullPolicy must be equal to one of the allowed values')), faults.join('; '));
    assert.ok(apiServerFaults({ ...good, spec: { ...spec, default: 'yes' } }).some((f) => f.startsWith('/spec/default must be boolean')));
  });

  it('declares the columns and the status subresource the docs name', () => {
    const version = crd.spec.versions[0];
    assert.deepEqual(version.additionalPrinterColumns.map((c: { name: string }) => c.name), ['Default', 'Native', 'Containers', 'Loaded', 'Age']);
    assert.deepEqual(version.subresources, { status: {} });
    assert.deepEqual(crd.spec.names.shortNames, ['sct']);
  });

  it('refuses at write time the fields that grow past what any sidecar needs: 10,000 env vars, a 40 KB arg, 300 annotations', () => {
    const base = { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: {} };
    const env = Array.from({ length: 10_000 }, (_, i) => ({ name: `VAR_${i}`, value: 'x'.repeat(100) }));
    assert.match(apiServerFaults({ ...base, spec: { containers: [{ name: 'big', image: 'r/big:1', env }] } }).join('\n'), /\/spec\/containers\/0\/env must NOT have more than 256 items/);
    assert.match(apiServerFaults({ ...base, spec: { containers: [{ name: 'big', image: 'r/big:1', args: ['x'.repeat(40_000)] }] } }).join('\n'), /\/spec\/containers\/0\/args\/0 must NOT have more than 32768 characters/);
    const annotations = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`a${i}`, 'v']));
    const faults = apiServerFaults({ ...base, spec: { annotations, containers: [{ name: 'big', image: 'r/big:1' }] } });
    assert.match(faults.join('\n'), /\/spec\/annotations must NOT have more than 128 properties/);
  });
});
