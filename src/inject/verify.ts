import { randomBytes } from 'node:crypto';
import { attempt, InjectorError } from '../errors.js';
import { clip } from '../log.js';
import type { Container, NamedItem, Pod } from '../kube/types.js';
import type { TemplateSet } from '../templates/load.js';
import { renderValues, type RenderValues } from '../templates/placeholders.js';
import { RenderBudget, type CompiledTemplate, type RenderedTemplate } from '../templates/template.js';
import {
  IMAGE_MIRROR_FLAG,
  imageRepository,
  mirroredFrom,
  NoImageMirrors,
  parseImage,
  sameRepository,
  suggestedMirror,
  type ImageMirrors,
} from '../kube-values/image.js';
import { Keys } from './keys.js';
import { OptInScope, parseNames, Reason, refusalReason, requiredFor, selectTemplates } from './policy.js';
import { leftToWebhook, renderTemplates, type InjectionContext } from './render.js';
import { isSubset } from '../templates/conflicts.js';
import { quantityOf } from '../kube-values/quantity.js';
import { requiredIn, whyRequired } from '../templates/required.js';
import { readStatus, StatusFormat, type InjectionStatus, type TemplateRecord } from './status-annotation.js';

/** The validating handler's verdict on one pod. */
export type Verdict =
  | { readonly kind: 'skipped'; readonly reason: Reason }
  | { readonly kind: 'allowed'; readonly reason: Reason; readonly templates: readonly string[] }
  | { readonly kind: 'denied'; readonly error: InjectorError; readonly reason: string; readonly statusReason: string; readonly templates: readonly string[] };

type Denied = Extract<Verdict, { kind: 'denied' }>;

/**
 * Decides whether an opted-in pod holds its sidecars. Tried in turn, cheapest and strictest first;
 * the first that admits the pod decides, and a pod none admits gets the current set's denial:
 *
 * 1. the current set: the selection recomputed from the pod, each selected template rendered and
 *    checked (missingSidecars). Every correctly injected pod at rest stops here;
 * 2. each set this replica served within the history window (set.history.earlier), the same way:
 *    a pod injected by a replica that is behind, or by this one before its volume changed; only
 *    if the pod also holds every template the current set requires in its namespace;
 * 3. the status annotation, only when it names a template version this replica never served (a
 *    newer set not yet on this volume, or a replica started after the set was replaced): the pod
 *    must hold exactly what the record says was injected, the record must name, for every
 *    template the current set selects, each of its sidecars, and a template recorded at a version
 *    served here must be at the current one and hold as step 1 requires. A re-read is asked for;
 * 4. a status of a release before template versions, within the window after this process started
 *    (an upgrade of the injector): every template the current set selects must be named in it, and
 *    each of its sidecars be in the pod by name.
 *
 * The status is written by /mutate, which replaces whatever value the pod came with; what a forged
 * one can and cannot get through is in the README ("Template rollouts").
 *
 * `mirrors` (--image-mirror) are the registry mirrors a later webhook rewrites images to: a sidecar
 * running its template's repository from a mirror holds (README, "Image matching").
 */
export function verifyPod(
  pod: Pod,
  set: TemplateSet,
  namespace: string,
  context: InjectionContext = {},
  scope: OptInScope = OptInScope.Pod,
  mirrors: ImageMirrors = NoImageMirrors,
): Verdict {
  const current = checkSet(pod, set, namespace, context, scope, mirrors);
  if (current.kind !== 'denied') return current;
  // An earlier set admits the pod only with every template the current set requires in its namespace.
  const required = requiredNames(set, namespace);
  for (const earlier of set.history?.earlier ?? []) {
    const verdict = checkSet(pod, earlier, namespace, context, scope, mirrors);
    if (verdict.kind === 'allowed' && required.every((n) => verdict.templates.includes(n))) return { ...verdict, reason: Reason.EarlierTemplates };
  }
  // The status is the pod's own to write: it never vouches for a template required in the namespace.
  if (!holdsRequired(pod, set, namespace, context, mirrors)) return current;
  const recorded = vouchedByStatus(pod, set, namespace, context, mirrors, scope);
  return recorded === undefined ? current : { kind: 'allowed', reason: recorded, templates: selectedNames(pod, set, namespace, scope, context) };
}

/**
 * Whether the pod holds every template the current set requires in `namespace` as that set renders
 * it. Steps 3 and 4 admit a pod only then: a pod that never passes /mutate (the required webhooks
 * are sent pods that opted out, and /mutate/required leaves a pod holding the sidecars' names as it
 * is) can carry any status, so a record of a version this replica never served would otherwise
 * vouch for an impostor. A pod injected from a changed required template by a replica that is
 * ahead is refused here until this one reads the change. Held by test/tenancy/required.attack.test.ts.
 */
function holdsRequired(pod: Pod, set: TemplateSet, namespace: string, context: InjectionContext, mirrors: ImageMirrors): boolean {
  const required = leftToWebhook(requiredFor(set, namespace), context, namespace);
  if (required.length === 0) return true;
  const check = attempt(() => missingSidecars(pod, required, namespace, context, mirrors));
  return !(check instanceof InjectorError) && check.missing.length === 0;
}

/** Steps 1 and 2: the pod against one template set. */
function checkSet(pod: Pod, set: TemplateSet, namespace: string, context: InjectionContext, scope: OptInScope, mirrors: ImageMirrors): Verdict {
  const selection = attempt(() => selectTemplates(pod, set, scope, namespace));
  if (selection instanceof InjectorError) return denied(selection, Reason.UnknownTemplate, []);
  if (!selection.inject) return { kind: 'skipped', reason: selection.reason };
  const chosen = leftToWebhook(selection.templates, context, namespace);
  if (chosen.length === 0) return { kind: 'skipped', reason: Reason.ByPolicy };
  const templates = chosen.map((t) => t.name);
  // A conflict or refused override denies here too, so both handlers agree on every pod.
  const check = attempt(() => missingSidecars(pod, chosen, namespace, context, mirrors));
  if (check instanceof InjectorError) return denied(check, refusalReason(check), []);
  if (check.missing.length > 0) {
    const required = requiredMissing(pod, chosen, namespace, context, mirrors);
    if (required !== undefined) return denied(required, Reason.RequiredSidecarMissing, templates, 'Forbidden');
    return denied(missingError(pod, check.missing.join('; ') + mirrorHint(check.suggestion)), Reason.SidecarsMissing, templates, 'Forbidden');
  }
  // Said in the audit annotation, the log line and the metrics, so a mirror's use stays visible.
  return { kind: 'allowed', reason: check.mirrored ? Reason.SidecarsMirrored : Reason.SidecarsPresent, templates };
}

/** The denial for the first required template (name order) whose sidecars the pod lacks: it names the template and why it is required. */
function requiredMissing(
  pod: Pod,
  selected: readonly CompiledTemplate[],
  namespace: string,
  context: InjectionContext,
  mirrors: ImageMirrors,
): InjectorError | undefined {
  for (const t of selected.filter((s) => requiredIn(s, namespace))) {
    const check = attempt(() => missingSidecars(pod, [t], namespace, context, mirrors));
    if (check instanceof InjectorError || check.missing.length === 0) continue;
    return new InjectorError('REQUIRED_SIDECAR_MISSING', [whyRequired(t, namespace), check.missing.join('; ')]);
  }
  return undefined;
}

/** The names of the templates required in `namespace`. */
function requiredNames(set: TemplateSet, namespace: string): string[] {
  return requiredFor(set, namespace).map((t) => t.name);
}

/**
 * The denial of a pod that lacks sidecars. Without a status annotation /mutate never injected it:
 * at admission, its mutating webhook failed open (test/apiserver/admission.test.ts: the injector's
 * mutating side down or slower than timeoutSeconds), and the message says so, since the user who
 * reads it in kubectl's error cannot see that call's failure anywhere else.
 */
function missingError(pod: Pod, missing: string): InjectorError {
  if (readStatus(pod).format === StatusFormat.None) return new InjectorError('SIDECARS_NOT_INJECTED', [Keys.status, missing]);
  return new InjectorError('SIDECARS_MISSING', [missing]);
}

/**
 * The end of a denial whose sidecar runs its repository's name from another registry: the flag that
 * would admit it. A policy that rewrites every image to a mirror otherwise refuses every opted-in
 * pod, and the operator must learn why from the message alone.
 */
function mirrorHint(suggestion: string | undefined): string {
  if (suggestion === undefined) return '';
  return `; if a policy or webhook rewrites images to a registry mirror after the injector, start the injector with --${IMAGE_MIRROR_FLAG} ${suggestion}`;
}

/** What the pod lacks of its templates, and how the sidecars it has run their repositories. */
interface SidecarCheck {
  readonly missing: string[];
  /** Some sidecar runs its template's repository from a mirror (--image-mirror). */
  readonly mirrored: boolean;
  /** For the first sidecar that runs its repository's name from another registry: the --image-mirror value that would admit it. */
  readonly suggestion: string | undefined;
}

/**
 * Lists what the selected templates require and the pod lacks: each sidecar container by name, in
 * the right list, running the template's image repository (or its mirror), and each template
 * volume by name. The sidecar of a template required in `namespace` must also run as the template
 * renders it (requiredDrift), and its volumes hold what the template's do: /mutate keeps a container the pod already has under the sidecar's
 * name, so a name and a repository alone would let a pod bring a mandatory sidecar of its own that
 * runs nothing.
 */
function missingSidecars(pod: Pod, templates: readonly CompiledTemplate[], namespace: string, context: InjectionContext, mirrors: ImageMirrors): SidecarCheck {
  // Rendered as the mutating handler renders them: an image override changes the expected repository.
  const rendered = renderTemplates(pod, templates, namespace, context);
  const spec = pod.spec ?? {};
  const containers = lookupOf(spec.containers);
  const initContainers = lookupOf(spec.initContainers);
  const volumes = lookupOf(spec.volumes);
  const missing: string[] = [];
  let mirrored = false;
  let suggestion: string | undefined;
  const required = new Set(templates.filter((t) => requiredIn(t, namespace)).map((t) => t.name));
  const nameFree = renderedNameFree(pod, templates, namespace, context);
  const names = podNames(pod);
  for (const [i, r] of rendered.entries()) {
    for (const [j, want] of r.containers.entries()) {
      const found = find(r.nativeSidecar ? initContainers : containers, want.name);
      let problem = checkContainer(want, found, r.nativeSidecar, mirrors);
      // A sidecar checkContainer admits (it found it) must still run as a required template renders it,
      // with the pod's name as whoever rendered it wrote it.
      if (found !== undefined && (problem === undefined || problem === MIRRORED) && required.has(r.name)) {
        const drift = requiredDrift(want, found, NO_NAMES);
        const free = drift === undefined ? undefined : nameFree()?.[i]?.containers[j];
        if (drift !== undefined && (free === undefined || requiredDrift(free, found, names) !== undefined)) problem = drift;
      }
      if (problem === MIRRORED) mirrored = true;
      else if (problem !== undefined) {
        missing.push(`${problem} (template "${r.name}")`);
        suggestion ??= found?.image === undefined ? undefined : suggestedMirror(want.image ?? '', found.image);
      }
    }
    for (const [j, v] of r.volumes.entries()) {
      const found = find(volumes, v.name);
      if (found === undefined) missing.push(`volume "${v.name}" (template "${r.name}")`);
      // /mutate keeps a volume the pod already has under the name: a required sidecar's must be the template's (defaults added).
      else if (required.has(r.name) && !fits(v, found, '', NO_NAMES) && !fits(nameFree()?.[i]?.volumes[j], found, '', names))
        missing.push(`volume "${v.name}" as its template defines it (template "${r.name}")`);
    }
  }
  return { missing, mirrored, suggestion };
}

/**
 * The renderings with the pod's name as NAME_SLOT, for a required sidecar that differs from the
 * rendering with the pod's own name: what it holds of the name depends on who rendered it. /mutate
 * sees a controller's pod with its generateName, /validate with the name the apiserver gave it in
 * between (webhook-facts.md, "What arrives before validation"), and `inject -f` writes
 * `web-<hash>-` (docs/cli.md, "Placeholders in workloads"); `fits` lets NAME_SLOT stand for one of
 * those forms of this pod's name only (standsForName). Made on first use; undefined when the
 * templates do not render with it. Held by test/tenancy/required.attack.test.ts ("a required
 * sidecar that reads the pod's name").
 */
function renderedNameFree(
  pod: Pod,
  templates: readonly CompiledTemplate[],
  namespace: string,
  context: InjectionContext,
): () => readonly RenderedTemplate[] | undefined {
  let made: readonly RenderedTemplate[] | undefined;
  let tried = false;
  return () => {
    if (tried) return made;
    tried = true;
    const { generateName: _generateName, ...metadata } = pod.metadata ?? {};
    const rendering = attempt(() => renderTemplates({ ...pod, metadata: { ...metadata, name: NAME_SLOT } }, templates, namespace, context));
    made = rendering instanceof InjectorError ? undefined : rendering;
    return made;
  };
}

/**
 * The pod's name in renderedNameFree: letters and digits, valid wherever a pod's name is, and
 * random per process, so no pod value (a label, an annotation, a ServiceAccount's name that a
 * template reads) can hold it and have its own text taken for the pod's name.
 */
const NAME_SLOT = `n${randomBytes(16).toString('hex')}`;

/** The forms of the pod's name a sidecar may hold: its name and its generateName. */
function podNames(pod: Pod): readonly string[] {
  const { name, generateName } = pod.metadata ?? {};
  return [name, generateName].filter((n): n is string => typeof n === 'string' && n !== '');
}

/** For a comparison in which NAME_SLOT stands for nothing. */
const NO_NAMES: readonly string[] = [];

/**
 * True when `text`, what a sidecar holds where its template reads the pod's name, is one of
 * `names` (the pod's name, its generateName), or `inject`'s form of one: the part it cannot know
 * written as one `<word>` (`web-<hash>-`, `web-<ordinal>`), read as a run of letters and digits.
 */
function standsForName(text: string, names: readonly string[]): boolean {
  if (names.includes(text)) return true;
  const form = INJECT_FORM.exec(text);
  if (form === null) return false;
  const [, before = '', after = ''] = form;
  return names.some(
    (name) =>
      name.length > before.length + after.length &&
      name.startsWith(before) &&
      name.endsWith(after) &&
      ALNUM.test(name.slice(before.length, name.length - after.length)),
  );
}

const INJECT_FORM = /^([a-z0-9.-]*)<[a-z-]{1,32}>([a-z0-9.-]*)$/;
const ALNUM = /^[a-z0-9]+$/;

/**
 * True when the pod's `found` holds every field the template's `want` sets, as isSubset judges (the
 * apiserver's defaults and other admission's additions are not a difference), with two readings of
 * its own: NAME_SLOT in `want`'s text stands for a form of the pod's name (standsForName), and a quantity (a volume's sizeLimit, an
 * env var's divisor, a claim template's requests and limits) is compared by value, since the
 * apiserver writes it in canonical form (`1024Mi` comes back `1Gi`).
 */
function fits(want: unknown, found: unknown, key: string, names: readonly string[]): boolean {
  if (want === found) return true;
  if (found === undefined || found === null) return isSubset(want, found);
  if (Array.isArray(want)) return Array.isArray(found) && want.length === found.length && want.every((w, i) => fits(w, found[i], key, names));
  if (typeof want === 'object' && want !== null) {
    if (typeof found !== 'object' || Array.isArray(found)) return false;
    const quantities = key === 'requests' || key === 'limits';
    return Object.entries(want).every(([k, w]) =>
      quantities ? sameQuantity(w, (found as Record<string, unknown>)[k]) : fits(w, (found as Record<string, unknown>)[k], k, names),
    );
  }
  if (QUANTITY_KEYS.has(key) && sameQuantity(want, found)) return true;
  if (typeof want === 'string' && typeof found === 'string' && want.includes(NAME_SLOT)) return matchesSlots(want.split(NAME_SLOT), found, names);
  return isSubset(want, found);
}

/** The fields of a container or volume that hold a quantity. */
const QUANTITY_KEYS: ReadonlySet<string> = new Set(['sizeLimit', 'divisor']);

function sameQuantity(a: unknown, b: unknown): boolean {
  const [x, y] = [quantityOf(a), quantityOf(b)];
  return x !== undefined && y !== undefined ? x.nanos === y.nanos : isSubset(a, b);
}

/**
 * True when `text` is `parts` joined by forms of the pod's name (standsForName): it begins with the
 * first part, ends with the last, and between them each slot holds one such form, found by the
 * first place the next part follows it (linear in the text).
 */
function matchesSlots(parts: readonly string[], text: string, names: readonly string[]): boolean {
  const [first = '', ...rest] = parts;
  const last = rest.pop() ?? '';
  if (names.length === 0 || !text.startsWith(first) || text.length < first.length + last.length + 1 || !text.endsWith(last)) return false;
  let at = first.length;
  const end = text.length - last.length;
  for (const part of rest) {
    const next = text.indexOf(part, at + 1);
    if (next === -1 || next + part.length > end || !standsForName(text.slice(at, next), names)) return false;
    at = next + part.length;
  }
  return at < end && standsForName(text.slice(at, end), names);
}

/**
 * A list of the pod's named items, to look a few names up in: the list itself when it is short
 * (a scan allocates nothing), else a map of it, so that a pod of thousands of items is indexed once
 * rather than scanned once per name a template wants.
 */
type Lookup<T extends NamedItem> = readonly T[] | ReadonlyMap<string, T>;
const SCANNED_ITEMS = 16;

function lookupOf<T extends NamedItem>(list: readonly T[] | undefined): Lookup<T> {
  if (list === undefined || list.length <= SCANNED_ITEMS) return list ?? [];
  return new Map(list.map((item) => [item.name, item]));
}

/** The item of that name; the last one when the pod (wrongly) has several, as a map of the list keeps it. */
function find<T extends NamedItem>(lookup: Lookup<T>, name: string): T | undefined {
  if (!Array.isArray(lookup)) return (lookup as ReadonlyMap<string, T>).get(name);
  const list = lookup as readonly T[];
  for (let i = list.length - 1; i >= 0; i--) if (list[i]!.name === name) return list[i];
  return undefined;
}

/** checkContainer's word for a sidecar that runs its template's repository from a mirror. */
const MIRRORED = Symbol('mirrored');

/** What is wrong with the pod's sidecar of that name, MIRRORED, or undefined when it is as the template wants. */
function checkContainer(want: Container, found: Container | undefined, native: boolean, mirrors: ImageMirrors): string | typeof MIRRORED | undefined {
  const kind = native ? 'native sidecar' : 'container';
  if (found === undefined) return native ? `native sidecar "${want.name}" in initContainers` : `container "${want.name}"`;
  if (native && found.restartPolicy !== 'Always') return `restartPolicy: Always on native sidecar "${want.name}"`;
  if (sameRepository(want.image ?? '', found.image ?? '')) return undefined;
  // Only a sidecar whose repository is not the template's pays for the mirrors.
  const repository = imageRepository(want.image ?? '');
  if (mirroredFrom(repository, found.image ?? '', mirrors) !== undefined) return MIRRORED;
  return `${kind} "${want.name}" with image repository ${repository} (it runs ${found.image ?? 'no image'})`;
}

/**
 * How a mandatory sidecar the pod holds under its name runs otherwise than its template renders it:
 * its command, args or workingDir differ, an env var of the template is not the pod's last of that
 * name (the one the kubelet sets), or a mount of the template is not the pod's at that path.
 * What the template leaves unset, what other admission adds (env vars, mounts, fields the
 * apiserver defaults, such as a fieldRef's apiVersion) and what webhooks commonly rewrite
 * (resources, probes, the image's tag or digest) are not compared, so that no such webhook makes
 * the pod's creation fail. Held by test/tenancy/required.attack.test.ts.
 */
function requiredDrift(want: Container, found: Container, names: readonly string[]): string | undefined {
  const what = `container "${want.name}" as its template renders it`;
  for (const field of ['command', 'args', 'workingDir'] as const) {
    // Absent and empty are the same run; a field the template leaves unset must stay unset.
    const [w, f] = [want[field] ?? EMPTY[field], found[field] ?? EMPTY[field]];
    if (!fits(w, f, field, names)) return `${what} (the pod's container has ${field} ${shown(found[field])} where the template has ${shown(want[field])})`;
  }
  // The pod's last env var of a name is the one the kubelet sets; a value the template writes is not replaced by a valueFrom.
  const env = keyed(found.env, (x) => x.name, names);
  const changedEnv = (want.env ?? []).find((e) => {
    const f = env(e.name);
    return !fits(e, f, 'env', names) || (e.value !== undefined && f?.valueFrom !== undefined);
  });
  if (changedEnv !== undefined) return `${what} (the pod's container sets env var ${clip(changedEnv.name, SHOWN)} otherwise)`;
  // A mount's subPath, subPathExpr or mountPropagation that the template leaves unset stays unset: a subPath would show the sidecar another directory.
  const mounts = keyed(found.volumeMounts, (x) => x.mountPath, names);
  const changedMount = (want.volumeMounts ?? []).find((m) => {
    const f = mounts(m.mountPath);
    return !fits(m, f, 'volumeMounts', names) || UNSET_MOUNT_FIELDS.some((k) => m[k] === undefined && f?.[k] !== undefined);
  });
  if (changedMount !== undefined) return `${what} (the pod's container mounts ${clip(changedMount.mountPath, SHOWN)} otherwise)`;
  return undefined;
}

const UNSET_MOUNT_FIELDS = ['subPath', 'subPathExpr', 'mountPropagation'] as const;

/**
 * A lookup of `items` by key, the last of a key winning: a map made once (linear in the pod's list,
 * whatever the number of keys the template asks for), and a scan only for a key that holds
 * NAME_SLOT (standing for a form of the pod's name).
 */
function keyed<T>(items: readonly T[] | undefined, key: (item: T) => string, names: readonly string[]): (want: string) => T | undefined {
  const byKey = new Map((items ?? []).map((item) => [key(item), item]));
  return (want) => {
    if (!want.includes(NAME_SLOT)) return byKey.get(want);
    const free = want.split(NAME_SLOT);
    for (let i = (items?.length ?? 0) - 1; i >= 0; i--) if (matchesSlots(free, key(items![i]!), names)) return items![i];
    return undefined;
  };
}

/** What an unset command, args or workingDir compares as. */
const EMPTY = { command: [] as readonly string[], args: [] as readonly string[], workingDir: '' } as const;

/** The most characters of a pod's value a denial shows. */
const SHOWN = 100;

function shown(value: unknown): string {
  return value === undefined ? 'none' : clip(JSON.stringify(value), SHOWN);
}

/** Steps 3 and 4: the reason the status annotation vouches for the pod, or undefined. */
function vouchedByStatus(
  pod: Pod,
  set: TemplateSet,
  namespace: string,
  context: InjectionContext,
  mirrors: ImageMirrors,
  scope: OptInScope,
): Reason | undefined {
  const recorded = readStatus(pod);
  if (recorded.format === StatusFormat.Versioned)
    return vouchedByRecord(pod, recorded.status, set, namespace, context, mirrors, scope) ? Reason.RecordedTemplates : undefined;
  if (recorded.format === StatusFormat.Unversioned && set.history?.acceptsUnversioned === true) {
    return vouchedByNames(pod, recorded.templates, set, namespace, context, scope) ? Reason.UnversionedStatus : undefined;
  }
  return undefined;
}

function vouchedByRecord(
  pod: Pod,
  status: InjectionStatus,
  set: TemplateSet,
  namespace: string,
  context: InjectionContext,
  mirrors: ImageMirrors,
  scope: OptInScope,
): boolean {
  const knows = (r: TemplateRecord): boolean => set.history?.knows(r.template, r.version, r.namespace) ?? set.templates.get(r.template)?.version === r.version;
  // A version served here was checked in full above: the record adds nothing to that verdict.
  if (status.injected.every(knows)) return false;
  set.history?.sawUnknownVersion();
  const parts = podParts(pod);
  if (!status.injected.every((r) => holds(parts, r, mirrors))) return false;
  // Beside a version never served, one served here must be the current one and hold as it defines
  // it, so that an entry of an unknown version never lends its trust to the others.
  if (!status.injected.every((r) => !knows(r) || holdsCurrent(pod, r, set, namespace, context, mirrors))) return false;
  const records = new Map(status.injected.map((r) => [r.template, r]));
  const values = renderValues(pod, namespace);
  return selectedNames(pod, set, namespace, scope, context).every((name) => {
    const record = records.get(name);
    if (record === undefined) return false;
    const t = set.templates.get(name);
    // A template this replica does not have yet is vouched for only by a version it never served.
    if (t === undefined) return !knows(record);
    const rendered = renderedWithin(t, values, context);
    return rendered !== undefined && rendered.containers.every((c) => hasName(record.containers, c.name) || hasName(record.initContainers, c.name));
  });
}

function holdsCurrent(pod: Pod, r: TemplateRecord, set: TemplateSet, namespace: string, context: InjectionContext, mirrors: ImageMirrors): boolean {
  const t = set.templates.get(r.template);
  if (t === undefined || t.version !== r.version) return false;
  const check = attempt(() => missingSidecars(pod, [t], namespace, context, mirrors));
  return !(check instanceof InjectorError) && check.missing.length === 0;
}

function vouchedByNames(pod: Pod, recorded: readonly string[], set: TemplateSet, namespace: string, context: InjectionContext, scope: OptInScope): boolean {
  const { containers, initContainers } = podParts(pod);
  const values = renderValues(pod, namespace);
  return selectedNames(pod, set, namespace, scope, context).every((name) => {
    const t = set.templates.get(name);
    if (t === undefined || !recorded.includes(name)) return false;
    const rendered = renderedWithin(t, values, context);
    return rendered !== undefined && rendered.containers.every((c) => containers.has(c.name) || initContainers.has(c.name));
  });
}

/** The template rendered for the pod within the render budget; undefined when it would go over (the current set's check denies such a pod). */
function renderedWithin(t: CompiledTemplate, values: RenderValues, context: InjectionContext): RenderedTemplate | undefined {
  const rendered = attempt(() => t.render(values, false, new RenderBudget(context.renderBytes)));
  return rendered instanceof InjectorError ? undefined : rendered;
}

/** True when the pod holds everything the record says its template put there (a recorded repository may run from its mirror). */
function holds(parts: PodParts, r: TemplateRecord, mirrors: ImageMirrors): boolean {
  const same = (found: Container | undefined, repository: string): boolean =>
    found !== undefined &&
    (sameRepository(repository, found.image ?? '') || mirroredFrom(imageRepository(repository), found.image ?? '', mirrors) !== undefined);
  for (const [name, repository] of Object.entries(r.containers ?? {})) {
    if (!same(parts.containers.get(name), repository)) return false;
  }
  for (const [name, repository] of Object.entries(r.initContainers ?? {})) {
    const found = parts.initContainers.get(name);
    if (!same(found, repository) || found?.restartPolicy !== 'Always') return false;
  }
  return (r.volumes ?? []).every((v) => parts.volumes.has(v));
}

/**
 * The template names the set selects for an opted-in pod: its templates annotation, else the
 * defaults; then those required in its namespace. With the required scope, those alone (selectTemplates).
 */
function selectedNames(pod: Pod, set: TemplateSet, namespace: string, scope: OptInScope, context: InjectionContext = {}): string[] {
  const names = selectedByPod(pod, set, namespace, scope);
  const { byPolicy } = context;
  if (byPolicy === undefined) return names;
  return names.filter((n) => {
    const t = set.templates.get(n);
    return t === undefined || !byPolicy(t, namespace);
  });
}

function selectedByPod(pod: Pod, set: TemplateSet, namespace: string, scope: OptInScope): string[] {
  if (scope === OptInScope.Required) return requiredNames(set, namespace);
  const annotations = pod.metadata?.annotations ?? {};
  const requested = parseNames(Object.hasOwn(annotations, Keys.templates) ? (annotations[Keys.templates] ?? '') : '');
  const chosen = requested.length > 0 ? requested : set.defaults.map((t) => t.name);
  return [...chosen, ...requiredNames(set, namespace).filter((n) => !chosen.includes(n))];
}

function hasName(map: Readonly<Record<string, string>> | undefined, name: string): boolean {
  return map !== undefined && Object.hasOwn(map, name);
}

interface PodParts {
  readonly containers: ReadonlyMap<string, Container>;
  readonly initContainers: ReadonlyMap<string, Container>;
  readonly volumes: ReadonlySet<string>;
}

function podParts(pod: Pod): PodParts {
  const spec = pod.spec ?? {};
  return {
    containers: byName(spec.containers),
    initContainers: byName(spec.initContainers),
    volumes: new Set((spec.volumes ?? []).map((v) => v.name)),
  };
}

function byName(list: Container[] | undefined): Map<string, Container> {
  return new Map((list ?? []).map((c) => [c.name, c]));
}

function denied(error: InjectorError, reason: string, templates: readonly string[], statusReason = 'BadRequest'): Denied {
  return { kind: 'denied', error, reason, statusReason, templates };
}

/**
 * The verdict on a pod UPDATE (the apiserver lets an update change a container's image and
 * nothing else of it): an update that changes the image of a sidecar a template required in the
 * namespace injects (by name, in the list the template puts it in) to anything but the image the
 * template renders for the pod, or drops that sidecar, is refused with REQUIRED_SIDECAR_CHANGED.
 * Any other update (labels, annotations, the application's images, a pod that never got the
 * sidecar) is allowed without rendering anything: only an update that changes some image renders
 * the required templates. A pod whose rendering fails then is refused (fail closed: a tenant could
 * grow a value the rendering reads to make it fail). Held by test/server/required-update.test.ts.
 */
export function verifyUpdate(pod: Pod, old: Pod, set: TemplateSet, namespace: string, context: InjectionContext = {}): Verdict {
  const required = requiredFor(set, namespace);
  const names = required.map((t) => t.name);
  const changed = changedImages(old, pod);
  if (changed.size === 0) return { kind: 'allowed', reason: Reason.RequiredSidecarsKept, templates: names };
  const rendered = attempt(() => renderTemplates(pod, required, namespace, context));
  if (rendered instanceof InjectorError) return denied(rendered, refusalReason(rendered), names);
  for (const r of rendered) {
    const template = required.find((t) => t.name === r.name)!;
    for (const want of r.containers) {
      const key = `${r.nativeSidecar ? 'initContainers' : 'containers'}/${want.name}`;
      if (!changed.has(key)) continue;
      const image = changed.get(key);
      const what =
        image === undefined
          ? `removes its ${r.nativeSidecar ? 'native sidecar' : 'container'} "${want.name}"`
          : sameImage(want.image ?? '', image)
            ? undefined
            : `sets the image of its ${r.nativeSidecar ? 'native sidecar' : 'container'} "${want.name}" to ${image} (the template injects ${want.image ?? 'no image'})`;
      if (what === undefined) continue;
      return denied(new InjectorError('REQUIRED_SIDECAR_CHANGED', [whyRequired(template, namespace), what]), Reason.RequiredSidecarChanged, names, 'Forbidden');
    }
  }
  return { kind: 'allowed', reason: Reason.RequiredSidecarsKept, templates: names };
}

/**
 * The containers and init containers whose image an update changes, as `list/name`: the new image,
 * or undefined for one the update drops. Ephemeral containers are left out (the pods/ephemeralcontainers
 * subresource adds them; an update of the pod cannot change them).
 */
function changedImages(old: Pod, pod: Pod): Map<string, string | undefined> {
  const changed = new Map<string, string | undefined>();
  for (const list of ['containers', 'initContainers'] as const) {
    const now = byName(pod.spec?.[list]);
    for (const before of old.spec?.[list] ?? []) {
      const after = now.get(before.name);
      if (after === undefined) changed.set(`${list}/${before.name}`, undefined);
      else if (after.image !== before.image) changed.set(`${list}/${before.name}`, after.image ?? '');
    }
  }
  return changed;
}

/** True when both references name the same image: one repository, the same tag and digest (the short and long forms of a name are one). */
function sameImage(a: string, b: string): boolean {
  if (a === b) return true;
  const x = parseImage(a);
  const y = parseImage(b);
  return !('problem' in x) && !('problem' in y) && x.repository === y.repository && x.tag === y.tag && x.digest === y.digest;
}
