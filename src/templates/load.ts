import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { LineCounter, parseAllDocuments, isNode, type Document } from 'yaml';
import { TemplateSetError, injectorError, type TemplateFault } from '../errors.js';
import type { TemplateHistory } from './history.js';
import { PlaceholderError } from './placeholders.js';
import { placementFault } from './placement.js';
import { sidecarTemplateSchema } from './schema.js';
import { compileTemplate, digestOf, type CompiledTemplate, type SidecarTemplateSpec } from './template.js';

/** A complete, validated set of templates; replaced as a whole, never edited in place. */
export interface TemplateSet {
  readonly templates: ReadonlyMap<string, CompiledTemplate>;
  /** Templates with `default: true`, in name order: injected when a pod names none. */
  readonly defaults: readonly CompiledTemplate[];
  /** Digest of every template's source, to tell which set is serving. */
  readonly digest: string;
  readonly source: string;
  /** The sets a running server served before this one (absent outside the server: CLI, tests). */
  readonly history?: TemplateHistory;
}

/** One template file's text, read from disk or given directly (lint, tests). */
export interface TemplateFile {
  readonly file: string;
  readonly text: string;
}

const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
const validateDocument = ajv.compile(sidecarTemplateSchema);

/** Lists and reads the template files of a directory (a mounted ConfigMap works: hidden entries are skipped). */
export async function readTemplateDir(dir: string): Promise<TemplateFile[]> {
  const names = (await readdir(dir)).filter((n) => !n.startsWith('.') && /\.ya?ml$/i.test(n)).sort();
  return Promise.all(names.map(async (n) => ({ file: join(dir, n), text: await readFile(join(dir, n), 'utf8') })));
}

/** Reads, validates and compiles a templates directory; throws TemplateSetError listing every fault. */
export async function loadTemplateSet(dir: string): Promise<TemplateSet> {
  const files = await readTemplateDir(dir);
  if (files.length === 0) throw injectorError('TEMPLATES_EMPTY', dir);
  return compileTemplateSet(files, dir);
}

/** Validates and compiles template files into a set; every fault is collected before throwing. */
export function compileTemplateSet(files: readonly TemplateFile[], source: string): TemplateSet {
  const faults: TemplateFault[] = [];
  const templates = new Map<string, CompiledTemplate>();
  const seen = new Map<string, string>();
  for (const f of files) {
    for (const t of compileFile(f, faults, seen)) templates.set(t.name, t);
  }
  if (faults.length > 0) throw new TemplateSetError(faults);
  const sorted = [...templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  return Object.freeze({
    templates,
    defaults: Object.freeze(sorted.filter((t) => t.isDefault)),
    digest: digestOf(files.map((f) => [f.file, f.text])),
    source,
  });
}

/** Compiles the documents of one file; `seen` maps each template name met so far to its file. */
function compileFile(f: TemplateFile, faults: TemplateFault[], seen: Map<string, string>): CompiledTemplate[] {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(f.text, { lineCounter, uniqueKeys: true });
  if (!Array.isArray(docs)) return []; // an empty file (only comments) holds no template
  const out: CompiledTemplate[] = [];
  for (const doc of docs) {
    const at = (path: string): { line?: number; column?: number } => positionOf(doc, path, lineCounter);
    if (doc.errors.length > 0) {
      for (const e of doc.errors) {
        const pos = lineCounter.linePos(e.pos[0]);
        faults.push({ file: f.file, path: '', message: `YAML: ${e.message.split('\n')[0]}`, line: pos.line, column: pos.col });
      }
      continue;
    }
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    const name = templateName(value);
    const before = faults.length;
    if (name !== undefined && seen.has(name)) {
      faults.push({ file: f.file, template: name, path: '/metadata/name', message: `duplicate template name, also defined in ${seen.get(name)}`, ...at('/metadata/name') });
    }
    if (name !== undefined && !seen.has(name)) seen.set(name, f.file);
    if (!validateDocument(value)) {
      for (const e of validateDocument.errors ?? []) faults.push({ file: f.file, ...withName(name), path: e.instancePath, message: describe(e), ...at(e.instancePath) });
    } else {
      checkSemantics((value as { spec: SidecarTemplateSpec }).spec, (path, message) => faults.push({ file: f.file, ...withName(name), path, message, ...at(path) }));
    }
    if (faults.length > before || name === undefined) continue;
    try {
      out.push(compileTemplate(name, f.file, (value as { spec: SidecarTemplateSpec }).spec));
    } catch (err) {
      if (!(err instanceof PlaceholderError)) throw err;
      faults.push({ file: f.file, template: name, path: err.path, message: err.message, ...at(err.path) });
    }
  }
  return out;
}

/** Rules a schema cannot say: names unique inside one template, native sidecars declared the right way. */
function checkSemantics(spec: SidecarTemplateSpec, fault: (path: string, message: string) => void): void {
  // Container names are unique across containers and init containers of a pod (core/v1 validation).
  const named = [...(spec.containers ?? []).map((c, i) => ({ name: c.name, at: `/spec/containers/${i}` })), ...(spec.initContainers ?? []).map((c, i) => ({ name: c.name, at: `/spec/initContainers/${i}` }))];
  const seen = new Set<string>();
  for (const c of named) {
    if (seen.has(c.name)) fault(`${c.at}/name`, `duplicate container name "${c.name}"`);
    seen.add(c.name);
  }
  unique(spec.volumes, '/spec/volumes', 'volume', fault);
  unique(spec.env, '/spec/env', 'env var', fault);
  const paths = (spec.volumeMounts ?? []).map((m) => m.mountPath);
  paths.forEach((p, i) => {
    if (paths.indexOf(p) !== i) fault(`/spec/volumeMounts/${i}/mountPath`, `duplicate mountPath "${p}"`);
  });
  const placement = placementFault(spec.placement);
  if (placement !== undefined) fault('/spec/placement', placement);
  if (spec.overrides?.length && !spec.containers?.length) fault('/spec/overrides', 'overrides apply to the first of spec.containers, and the template has none');
  if (spec.nativeSidecar !== true) {
    (spec.containers ?? []).forEach((c, i) => {
      if (c.restartPolicy !== undefined) fault(`/spec/containers/${i}/restartPolicy`, 'restartPolicy is only allowed with nativeSidecar: true');
    });
  }
  // core/v1 validation: a plain init container (no restartPolicy: Always) may not have probes or lifecycle hooks.
  (spec.initContainers ?? []).forEach((c, i) => {
    if (c.restartPolicy === 'Always') return;
    for (const field of ['lifecycle', 'livenessProbe', 'readinessProbe', 'startupProbe'] as const) {
      if (c[field] !== undefined) fault(`/spec/initContainers/${i}/${field}`, `${field} is not allowed on an init container unless it has restartPolicy: Always`);
    }
  });
  if (!spec.containers?.length && !spec.initContainers?.length && !spec.volumes?.length && !spec.volumeMounts?.length && !spec.env?.length && !spec.annotations && !spec.labels && !spec.imagePullSecrets?.length) {
    fault('/spec', 'the template injects nothing');
  }
}

function unique(items: readonly { name: string }[] | undefined, path: string, what: string, fault: (path: string, message: string) => void): void {
  const seen = new Set<string>();
  (items ?? []).forEach((item, i) => {
    if (seen.has(item.name)) fault(`${path}/${i}/name`, `duplicate ${what} name "${item.name}"`);
    seen.add(item.name);
  });
}

function templateName(value: unknown): string | undefined {
  const meta = (value as { metadata?: { name?: unknown } }).metadata;
  return typeof meta?.name === 'string' ? meta.name : undefined;
}

function withName(name: string | undefined): { template?: string } {
  return name === undefined ? {} : { template: name };
}

function describe(e: ErrorObject): string {
  if (e.keyword === 'additionalProperties') return `unknown field "${String(e.params['additionalProperty'])}"`;
  if (e.keyword === 'required') return `missing required field "${String(e.params['missingProperty'])}"`;
  if (e.keyword === 'enum') return `${e.message ?? 'invalid value'}: ${(e.params['allowedValues'] as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
  if (e.keyword === 'const') return `must be ${JSON.stringify(e.params['allowedValue'])}`;
  if (e.keyword === 'pattern') return `does not match ${String(e.params['pattern'])}`;
  return e.message ?? e.keyword;
}

/** Maps a JSON pointer to the 1-based line and column of the YAML node it names, or its nearest parent. */
export function positionOf(doc: Document, pointer: string, lc: LineCounter): { line?: number; column?: number } {
  const keys = pointer === '' ? [] : pointer.slice(1).split('/').map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~'));
  for (let n = keys.length; n >= 0; n--) {
    const node = doc.getIn(keys.slice(0, n).map((k) => (/^\d+$/.test(k) ? Number(k) : k)), true);
    if (isNode(node) && node.range) {
      const pos = lc.linePos(node.range[0]);
      return { line: pos.line, column: pos.col };
    }
  }
  return {};
}
