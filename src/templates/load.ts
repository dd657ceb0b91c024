import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { LineCounter, isNode, type Document } from 'yaml';
import { TemplateSetError, injectorError, type TemplateFault } from '../errors.js';
import { findConflicts } from './conflicts.js';
import { editDistance } from './edit-distance.js';
import { errorPosition, parseKubectl } from '../yaml/kubectl.js';
import { PlaceholderError, placeholderFaults, renderValues } from './placeholders.js';
import { placementFault } from './placement.js';
import { requiredSpecFaults } from './required.js';
import { FormatMessages, tokenFault, volumeSources, type Format } from './schema.js';
import { validate as validateTemplateDocument } from '../generated/template-validator.js';
import { compileTemplate, digestOf, type CompiledTemplate, type SidecarTemplateSpec } from './template.js';
import { KeysRead, valueFaults } from './values.js';

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
  /**
   * The set each namespace with SidecarTemplates of its own sees: the cluster-wide
   * templates overlaid by the namespace's, prepared once per change. Absent for a namespace without
   * templates of its own, which sees this set itself; absent altogether for a directory of files.
   */
  readonly namespaces?: ReadonlyMap<string, TemplateSet>;
  /** The templates with spec.required, in name order (required.ts decides for which namespaces); absent when none is. */
  readonly required?: readonly CompiledTemplate[];
}

/** The set a pod of `namespace` is judged against: its namespace's own, else the cluster-wide one. */
export function setFor(set: TemplateSet, namespace: string): TemplateSet {
  return set.namespaces?.get(namespace) ?? set;
}

/**
 * What one replica remembers of the template sets it served, for the validating handler. A changed
 * ConfigMap reaches each replica's volume at its own time (the kubelet's sync period plus its cache
 * TTL, a minute or two), and the apiserver may call /mutate on one replica and /validate on
 * another, so a pod injected under one version is often checked by a replica that serves another.
 */
export interface TemplateHistory {
  /** Sets this replica served before the current one, newest first, replaced less than the window ago. */
  readonly earlier: readonly TemplateSet[];
  /**
   * True when this replica has served that version of that template, from that namespace's
   * SidecarTemplate objects (absent: a file), at most the last VERSIONS_KEPT kept. A team's
   * template and another's of the same name and content are different templates.
   */
  knows(template: string, version: string, namespace?: string): boolean;
  /**
   * True while status annotations of a release before template versions are trusted as far as their
   * template names go: the first window after this process started (an upgrade of the injector).
   */
  readonly acceptsUnversioned: boolean;
  /** A pod named a template version this replica never served: a newer set may be on its way here. */
  sawUnknownVersion(): void;
}

/** One template file's text, read from disk or given directly (lint, tests). */
export interface TemplateFile {
  readonly file: string;
  readonly text: string;
  /** The namespace of a SidecarTemplate object read from the cluster; recorded in the status annotation. */
  readonly namespace?: string;
}

// The template schema compiled by `npm run schema` (ajv standalone code, with `allErrors` and
// `verbose`: each error keeps the failing value and schema, for messages that say what was found
// and what is allowed); compiling it here would cost ~0.5 s of CPU and ~16 MB at every start.
const validateDocument = validateTemplateDocument as unknown as ValidateFunction;

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
  const sorted = [...templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  faults.push(...defaultConflicts(sorted.filter((t) => t.isDefault), files));
  if (faults.length > 0) throw new TemplateSetError(faults);
  const required = sorted.filter((t) => t.required !== undefined);
  return Object.freeze({
    templates,
    defaults: Object.freeze(sorted.filter((t) => t.isDefault)),
    digest: digestOf(files.map((f) => [f.file, f.text])),
    source,
    ...(required.length > 0 && { required: Object.freeze(required) }),
  });
}

/**
 * Default templates are injected together into every pod that names none; if they conflict, every
 * such pod would be denied, so the set is refused (the same fault `lint` reports).
 */
function defaultConflicts(defaults: readonly CompiledTemplate[], files: readonly TemplateFile[]): TemplateFault[] {
  if (defaults.length < 2) return [];
  const values = renderValues({ metadata: {}, spec: { containers: [] } }, 'default');
  return findConflicts(defaults.map((t) => t.render(values))).map((c) => {
    const t = defaults.find((d) => d.name === c.template)!;
    const message = `${c.message}: both are default templates, so every pod that names none would be denied`;
    return { file: t.file, template: t.name, path: c.path, message, ...positionInFiles(files, t.file, t.name, c.path) };
  });
}

/** Line and column of a JSON path inside the named template of a file. */
export function positionInFiles(files: readonly TemplateFile[], file: string, template: string | undefined, path: string): { line?: number; column?: number } {
  const text = files.find((f) => f.file === file)?.text;
  if (text === undefined) return {};
  const lc = new LineCounter();
  const docs = parseKubectl(text, lc);
  const doc = docs.find((d) => (d.value as { metadata?: { name?: unknown } } | null)?.metadata?.name === template) ?? docs[0];
  return doc === undefined ? {} : positionOf(doc.doc, path, lc);
}

/** Compiles the documents of one file; `seen` maps each template name met so far to its file. */
function compileFile(f: TemplateFile, faults: TemplateFault[], seen: Map<string, string>): CompiledTemplate[] {
  const lineCounter = new LineCounter();
  const out: CompiledTemplate[] = [];
  // Read as kubectl reads a manifest (YAML 1.1: `0644` is octal, `no` is false), so a template means
  // what the same text means in a pod spec.
  for (const { doc, value } of parseKubectl(f.text, lineCounter)) {
    const at = (path: string): { line?: number; column?: number } => positionOf(doc, path, lineCounter);
    const syntax = errorPosition(doc, lineCounter);
    if (syntax !== undefined) {
      faults.push({ file: f.file, path: '', message: `YAML: ${doc.errors[0]!.message.split('\n')[0]}`, ...syntax });
      continue;
    }
    if (value === null || value === undefined) continue;
    const name = templateName(value);
    const before = faults.length;
    if (name !== undefined && seen.has(name)) {
      faults.push({ file: f.file, template: name, path: '/metadata/name', message: `duplicate template name, also defined in ${seen.get(name)}`, ...at('/metadata/name') });
    }
    if (name !== undefined && !seen.has(name)) seen.set(name, f.file);
    const schemaFaults = documentFaults(value);
    for (const sf of schemaFaults) faults.push({ file: f.file, ...withName(name), ...sf, ...at(sf.path) });
    if (name === undefined) continue;
    // Every check runs, whatever an earlier one found, so one run reports every fault of the
    // template (test/templates/load.test.ts, "every fault in one run").
    const spec = (value as { spec: SidecarTemplateSpec }).spec;
    // One fault per path: a later check that refuses what an earlier one refused says it again.
    const found = new Set(faults.slice(before).map((x) => x.path));
    const add = (path: string, message: string): void => {
      if (found.has(path)) return;
      found.add(path);
      faults.push({ file: f.file, template: name, path, message, ...at(path) });
    };
    try {
      checkSemantics(spec, add);
      const compiled = compileTemplate(name, f.file, spec, f.namespace);
      // Values Kubernetes refuses where they land, as written or as a Deployment's pod renders them.
      for (const vf of valueFaults(spec, KeysRead.Present)) add(vf.path, vf.message);
      if (faults.length === before) out.push(compiled);
    } catch (err) {
      if (err instanceof PlaceholderError) {
        // Every bad placeholder of the template, not only the first compileTemplate met. `placement`
        // names containers and is never compiled.
        const { placement: _placement, ...compiled } = spec;
        for (const pf of placeholderFaults(compiled, '/spec')) add(pf.path, pf.message);
        continue;
      }
      // A document already at fault may lack the shape the later checks walk: its faults stand.
      if (faults.length === before) throw err;
    }
  }
  return out;
}

/**
 * Schema faults of one document: shape, unknown fields, the core/v1 required fields and enums,
 * values; one per path and message.
 */
function documentFaults(value: unknown): { path: string; message: string }[] {
  let valid: boolean;
  try {
    valid = validateDocument(value);
  } catch (err) {
    // The schema's uniqueItems compares items with fast-deep-equal, which throws on an object whose
    // own valueOf or toString is not a function (`overrides: [{}, {"valueOf": []}]`): a fault of the
    // document, never a crash of the loader (test/templates/load.test.ts "hostile values").
    return [{ path: '', message: `holds a value the schema check cannot compare (${err instanceof Error ? err.message : String(err)}); write each list item as its field's type` }];
  }
  if (valid) return [];
  const found = new Map<string, { path: string; message: string }>();
  for (const e of validateDocument.errors ?? []) {
    const fault = { path: errorPath(e), message: describe(e) };
    found.set(`${fault.path}\0${fault.message}`, fault);
  }
  return [...found.values()];
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
  // A volume has one source (validateVolumeSource: "may not specify more than 1 volume type"); none,
  // or `emptyDir:` left empty, is defaulted to an emptyDir by the apiserver.
  (spec.volumes ?? []).forEach((v, i) => {
    const sources = volumeSources(v);
    if (sources.length > 1) fault(`/spec/volumes/${i}/${sources[1]}`, `volume "${v.name}" has ${sources.length} sources (${sources.join(', ')}); a volume takes exactly one`);
  });
  unique(spec.env, '/spec/env', 'env var', fault);
  const paths = (spec.volumeMounts ?? []).map((m) => m.mountPath);
  paths.forEach((p, i) => {
    if (paths.indexOf(p) !== i) fault(`/spec/volumeMounts/${i}/mountPath`, `duplicate mountPath "${p}"`);
  });
  const token = typeof spec.serviceAccountToken === 'object' ? tokenFault(spec.serviceAccountToken) : undefined;
  if (token !== undefined) fault(`/spec/serviceAccountToken/${token[0]}`, token[1]);
  const placement = placementFault(spec.placement);
  if (placement !== undefined) fault('/spec/placement', placement);
  requiredSpecFaults(spec.required, spec.overrides, fault);
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

/** Where an error points: an unknown field at the field itself, a missing one at the object that lacks it. */
function errorPath(e: ErrorObject): string {
  if (e.keyword === 'additionalProperties') return `${e.instancePath}/${escapeKey(String(e.params['additionalProperty']))}`;
  return e.instancePath;
}

function escapeKey(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** A message a person can act on, in place of ajv's wording. */
function describe(e: ErrorObject): string {
  const got = JSON.stringify(e.data);
  switch (e.keyword) {
    case 'additionalProperties':
      return unknownField(String(e.params['additionalProperty']), Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {}));
    case 'required':
      return `missing required field "${String(e.params['missingProperty'])}"`;
    case 'enum':
      return `must be one of ${(e.params['allowedValues'] as unknown[]).filter((v) => v !== null).map((v) => JSON.stringify(v)).join(', ')}, got ${got}`;
    case 'const':
      return `must be ${JSON.stringify(e.params['allowedValue'])}, got ${got}`;
    case 'type':
      return typeMessage(String(e.params['type']), e.data);
    case 'format':
      return `${FormatMessages[e.params['format'] as Format] ?? `must be a ${String(e.params['format'])}`}, got ${got}`;
    case 'minimum':
    case 'maximum':
      return rangeMessage(e);
    case 'minLength':
      return 'must not be empty';
    case 'pattern':
      return `${got} is not a valid key: an optional DNS subdomain prefix and "/", then at most 63 letters, digits, "-", "_" and "."`;
    case 'uniqueItems':
      return `lists ${JSON.stringify((e.data as unknown[])[Number(e.params['i'])])} twice`;
    default:
      return e.message ?? e.keyword;
  }
}

function unknownField(field: string, known: readonly string[]): string {
  // The banded distance: a field name a tenant wrote may be long, and one further than two edits
  // from every known name costs nothing more than the length check.
  const close = known.find((k) => editDistance(k.toLowerCase(), field.toLowerCase(), 2) <= 2);
  const hint = close === undefined ? `known fields: ${known.join(', ')}` : `did you mean "${close}"?`;
  return `unknown field "${field.length <= 64 ? field : `${field.slice(0, 61)}...`}" (${hint})`;
}

// kubectl's YAML reads unquoted yes/no/on/off as booleans and 0400 or 1e3 as numbers.
function typeMessage(expected: string, data: unknown): string {
  const want = expected.split(',').filter((t) => t !== 'null').map((t) => (t === 'integer' ? 'an integer' : t === 'object' || t === 'array' ? `an ${t}` : `a ${t}`)).join(' or ');
  const hint = expected.includes('string') && (typeof data === 'boolean' || typeof data === 'number') ? ': YAML 1.1 (kubectl) reads it unquoted as a boolean or number, so quote it' : '';
  return `must be ${want}, got ${JSON.stringify(data)}${hint}`;
}

function rangeMessage(e: ErrorObject): string {
  const data = e.data as number;
  if (/\/(defaultMode|mode)$/.test(e.instancePath)) {
    // 644 written without its leading 0 is decimal 644 = 01204, refused by the apiserver.
    const octalLooking = /^[0-7]+$/.test(String(data)) ? `; write it in octal with a leading 0 (0${data})` : '';
    return `must be a file mode between 0 and 0777 (octal), got ${data} (0${data.toString(8)} in octal)${octalLooking}`;
  }
  const schema = e.parentSchema as { minimum?: number; maximum?: number; format?: string };
  if (schema.format === 'quantity') return `${FormatMessages.quantity}, got ${data}`;
  return `must be a port number between ${schema.minimum ?? 0} and ${schema.maximum ?? 65535}, got ${data}`;
}

/** Maps a JSON pointer to the 1-based line and column of the YAML node it names, or its nearest parent. */
function positionOf(doc: Document, pointer: string, lc: LineCounter): { line?: number; column?: number } {
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
