import { Overridable } from '../templates/schema.js';
import { editDistance } from '../templates/edit-distance.js';

/** The label and annotations that make up the user-facing contract. */
export const Keys = {
  /** Label: "true" opts a pod in, "false" (or anything else, or none) leaves it alone. */
  inject: 'sidecar-injector.io/inject',
  /** Annotation: comma-separated template names, in order; overrides the default templates. */
  templates: 'sidecar-injector.io/templates',
  /** Annotation: comma-separated container names; only those of the pod's containers get the templates' env and volumeMounts. */
  appContainers: 'sidecar-injector.io/app-containers',
  /** Annotation written by the injector: the injected template names and a digest of what was rendered. */
  status: 'sidecar-injector.io/status',
} as const;

/** The prefix of the contract's keys; `<template>.sidecar-injector.io/` holds a template's override annotations. */
const KEY_PREFIX = 'sidecar-injector.io';
const TEMPLATE_SUFFIX = `.${KEY_PREFIX}`;

type Where = 'label' | 'annotation';

/** The contract's keys by the object they go on. */
const Contract: Readonly<Record<Where, readonly string[]>> = { label: [Keys.inject], annotation: [Keys.templates, Keys.appContainers, Keys.status] };

/** What the check of a pod's keys knows besides the pod. */
export interface KeyContext {
  /** The templates of the set in force, by name, with the keys each adds or reads (a template's own, never a typo). */
  readonly templates: ReadonlyMap<string, { readonly keys: ReadonlySet<string> }>;
  /** The names of the templates selected for the pod; undefined when it gets none. */
  readonly selected?: readonly string[];
}

/** A pod's or a workload's labels and annotations. */
export interface KeyMaps {
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

/**
 * Warnings per pod about its keys, then one that counts the rest: a pod may carry thousands of
 * annotations, and the apiserver keeps only about 4 KiB of warnings.
 */
const MAX_KEY_WARNINGS = 5;
/** Keys are quoted up to this length (a key may hold 316 characters), so a warning stays near 120. */
const SHOWN_KEY = 64;
/**
 * Keys that look meant for the injector examined per pod; each is looked up in every template of the
 * set, so the work of a pod of thousands such keys against a namespace of hundreds of templates stays
 * some ten thousand lookups (test/inject/keys.test.ts "bounds the work ...").
 */
const MAX_KEYS_EXAMINED = 64;
/** Template names compared with a key's unknown template name when a suggestion is looked for. */
const MAX_NAMES_COMPARED = 256;

/**
 * The pod's labels and annotations that look meant for the injector but that it does not read,
 * each with the key it probably meant: a key under `sidecar-injector.io/` that is not
 * one of the contract's (`/template` for `/templates`), a contract key on the wrong object (the
 * label `inject` written as an annotation), a key whose prefix is a near miss
 * (`sidecar-injector.com/`, `sidecarinjector.io/`, `sidecar.injector.io/`), an override annotation
 * of a template that does not exist or is not selected, and an inject label that is neither "true"
 * nor "false". The injector ignores them as it always did: these are warnings, never denials.
 */
export function strayKeyWarnings(meta: KeyMaps, context: KeyContext): string[] {
  const found: string[] = [];
  const inject = meta.labels !== undefined && Object.hasOwn(meta.labels, Keys.inject) ? meta.labels[Keys.inject] : undefined;
  if (typeof inject === 'string' && inject !== 'true' && inject !== 'false')
    found.push(`label ${Keys.inject}="${shown(inject)}" leaves the pod alone: only "true" opts it in`);
  let examined = 0;
  for (const [where, map] of [
    ['label', meta.labels],
    ['annotation', meta.annotations],
  ] as const) {
    for (const key in map) {
      // Described only once it is known to be a stray: a key some template adds or reads needs no
      // suggestion, whose search compares names.
      if (looksMeant(key, where, context, false) === undefined) continue;
      if (++examined > MAX_KEYS_EXAMINED) return [...found, UNEXAMINED_KEYS];
      if (isTemplateKey(key, context)) continue;
      // Past the cap, one more is enough to say so: the walk stops there, so a pod of thousands of
      // near misses costs no more than a few.
      if (found.length >= MAX_KEY_WARNINGS) return [...found, MORE_KEYS];
      found.push(looksMeant(key, where, context, true)!);
    }
  }
  return found;
}

const MORE_KEYS = `more keys of the pod look meant for the injector; only the first ${MAX_KEY_WARNINGS} are named`;
const UNEXAMINED_KEYS = `the pod has more than ${MAX_KEYS_EXAMINED} keys under the injector's prefixes; only the first ${MAX_KEYS_EXAMINED} were checked`;

/**
 * Keys of the contract that a workload carries on its own metadata and its pod template lacks: a
 * controller copies only the template's labels and annotations to its pods, so admission never sees
 * them (only the CLI, reading the workload, can tell).
 */
export function workloadKeyWarnings(kind: string, workload: KeyMaps, pod: KeyMaps): string[] {
  const out: string[] = [];
  for (const [where, own, template] of [
    ['label', workload.labels, pod.labels],
    ['annotation', workload.annotations, pod.annotations],
  ] as const) {
    for (const key in own) {
      if (out.length >= MAX_KEY_WARNINGS) return out;
      if (!isInjectorKey(key) || (template !== undefined && Object.hasOwn(template, key))) continue;
      out.push(`${where} "${shown(key)}" is on the ${kind}, not on its pod template (spec.template.metadata): its pods never get it`);
    }
  }
  return out;
}

/** A key of the contract, or under a template's override prefix. */
function isInjectorKey(key: string): boolean {
  const slash = key.indexOf('/');
  return (
    (slash === KEY_PREFIX.length && key.startsWith(KEY_PREFIX)) ||
    (slash > TEMPLATE_SUFFIX.length && key.startsWith(TEMPLATE_SUFFIX, slash - TEMPLATE_SUFFIX.length))
  );
}

/** A key some template of the set adds or reads. */
function isTemplateKey(key: string, context: KeyContext): boolean {
  for (const t of context.templates.values()) if (t.keys.has(key)) return true;
  return false;
}

function looksMeant(key: string, where: Where, context: KeyContext, describe: boolean): string | undefined {
  const slash = key.indexOf('/');
  if (slash <= 0) return undefined;
  if (slash === KEY_PREFIX.length && key.startsWith(KEY_PREFIX)) {
    if (Contract[where].includes(key)) return undefined;
    return describe ? unread(where, key, suggestedKey(key.slice(slash + 1), where), `its ${where} is ${Contract[where][0]}`) : '';
  }
  if (slash > TEMPLATE_SUFFIX.length && key.startsWith(TEMPLATE_SUFFIX, slash - TEMPLATE_SUFFIX.length)) {
    return templateKey(key, key.slice(0, slash - TEMPLATE_SUFFIX.length), key.slice(slash + 1), where, context, describe);
  }
  if (!mayBeNear(key, slash)) return undefined;
  const near = nearMiss(key.slice(0, slash));
  if (near === undefined) return undefined;
  if (!describe) return '';
  const name = key.slice(slash + 1);
  if (near.template !== undefined) return unread(where, key, { where: 'annotation', key: `${near.template}${TEMPLATE_SUFFIX}/${name}` });
  return unread(where, key, suggestedKey(name, where), `its keys are under ${KEY_PREFIX}/`);
}

/**
 * A key under `<template>.sidecar-injector.io/`: the override annotations of a selected template
 * are read (and warned of) by overrides.ts; a template's own labels may use its prefix.
 */
function templateKey(key: string, template: string, name: string, where: Where, context: KeyContext, describe: boolean): string | undefined {
  const isField = (Overridable as readonly string[]).includes(name);
  if (where === 'label') return isField ? (describe ? unread(where, key, { where: 'annotation', key }) : '') : undefined;
  if (context.templates.has(template)) {
    if (context.selected === undefined || context.selected.includes(template) || !isField) return undefined;
    return describe ? unread(where, key, undefined, `template "${shown(template)}" is not selected for this pod`) : '';
  }
  if (!describe) return '';
  const nearest = nearestOf(template, context.templates.keys());
  if (nearest !== undefined) return unread(where, key, { where, key: `${nearest}${TEMPLATE_SUFFIX}/${name}` });
  return unread(where, key, undefined, `no template is named "${shown(template)}"`);
}

function unread(where: Where, key: string, meant: { readonly where: Where; readonly key: string } | undefined, why?: string): string {
  const head = `${where} "${shown(key)}" is not read by the injector`;
  if (meant !== undefined) return `${head}; did you mean ${meant.where === where ? '' : `the ${meant.where} `}"${shown(meant.key)}"?`;
  return why === undefined ? head : `${head}: ${why}`;
}

/** The contract key whose name is nearest to `name` (the same object's first), if any is near. */
function suggestedKey(name: string, where: Where): { readonly where: Where; readonly key: string } | undefined {
  const other: Where = where === 'label' ? 'annotation' : 'label';
  let best: { where: Where; key: string; distance: number } | undefined;
  for (const w of [where, other]) {
    for (const key of Contract[w]) {
      const distance = editDistance(name, key.slice(KEY_PREFIX.length + 1), nearEnough(name));
      if (distance <= nearEnough(name) && (best === undefined || distance < best.distance)) best = { where: w, key, distance };
    }
  }
  return best;
}

/** The name of `names` nearest to `name`, if any is near, among the first MAX_NAMES_COMPARED of them. */
function nearestOf(name: string, names: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = nearEnough(name) + 1;
  let compared = 0;
  for (const candidate of names) {
    if (++compared > MAX_NAMES_COMPARED) break;
    const distance = editDistance(name, candidate, bestDistance - 1);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

/** How many edits still make a near miss of a word: one in a short word, up to three in a long one. */
const nearEnough = (word: string): number => (word.length <= 4 ? 1 : word.length <= 8 ? 2 : 3);

/**
 * A cheap test that a prefix may be a near miss, before any string is made: at most two edits of
 * `sidecarinjectorio` leave one of the three pieces `sidec`, `injec`, `tor` whole (two edits
 * break two pieces at most), so a prefix with none of them is none (every key of a pod
 * comes here, and a pod may carry thousands). Measured on 4096 annotations of common prefixes
 * (prometheus.io, kubectl.kubernetes.io, app.kubernetes.io), in process: keyWarnings took 0.6 ms
 * with this test and 2.1 ms without it, the bare walk of the map 0.4 ms; the injector's review of
 * such a pod takes some 13 ms.
 */
function mayBeNear(key: string, slash: number): boolean {
  for (const piece of NEAR_PIECES) {
    const at = key.indexOf(piece);
    if (at >= 0 && at < slash) return true;
  }
  return false;
}

const NEAR_PIECES = ['sidec', 'injec', 'tor'] as const;

/** `sidecar-injector.io` without its separators: what a near-miss prefix is compared with. */
const SQUEEZED_PREFIX = 'sidecarinjectorio';

/**
 * A prefix that is not `sidecar-injector.io` but nearly (`sidecar-injector.com`, `sidecarinjector.io`,
 * `sidecar.injector.io`, `sidcar-injector.io`), compared without its separators; or
 * `<template>.` and such a prefix. Another project's longer prefix (`sidecar-injector.example.com`)
 * is no near miss.
 */
function nearMiss(prefix: string): { readonly template?: string } | undefined {
  if (isNear(prefix)) return {};
  const dot = prefix.indexOf('.');
  if (dot > 0 && isNear(prefix.slice(dot + 1))) return { template: prefix.slice(0, dot) };
  return undefined;
}

function isNear(prefix: string): boolean {
  // Most prefixes are too short or too long to be near: no string is made for them.
  if (prefix.length < SQUEEZED_PREFIX.length - 2 || prefix.length > SQUEEZED_PREFIX.length + 8) return false;
  if (prefix === KEY_PREFIX) return false;
  const squeezed = prefix.toLowerCase().replace(/[-._]/g, '');
  return editDistance(squeezed, SQUEEZED_PREFIX, 2) <= 2;
}

function shown(text: string): string {
  return text.length <= SHOWN_KEY ? text : `${text.slice(0, SHOWN_KEY - 3)}...`;
}
