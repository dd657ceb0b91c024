import { Keys } from '../inject/keys.js';
import type { Container } from '../kube/types.js';
import { clip } from '../log.js';
import { placeholdersOf } from '../templates/placeholders.js';
import type { TemplateSet } from '../templates/load.js';
import { overrideKey } from '../templates/override-keys.js';
import { QUANTITY_PATTERN } from '../templates/schema.js';
import { NativeSidecar, type CompiledTemplate } from '../templates/template.js';
import { enforcesRequired, matchConstraints, POLICY_API, type Names } from './bindings.js';
import { boundsValidations, withinBounds } from './bounds.js';
import { celString, placeholderCel } from './cel.js';
import { renderedImage, repositoryOf, sameImageCel, sameRepositoryCel } from './image.js';
import type { QuantityOverride } from './mutation.js';
import { celList, IN_JOB, OPTED_IN, REQUESTED, requiredIn, selectedExpr, type SetContext } from './selection.js';

/** The ValidatingAdmissionPolicies: the counterparts of /validate and /validate/required. */

/**
 * The counterpart of /validate: an opted-in pod that names an unknown template, selects one that
 * only the webhook can inject, or lacks a compiled template's containers (by name, native sidecars
 * in initContainers with restartPolicy Always) or volumes (by name), is refused.
 */
export function validatingPolicy(
  set: TemplateSet,
  compiled: readonly CompiledTemplate[],
  /** The templates only the webhook injects that a pod must not select (none beside the webhook). */
  webhookOnly: readonly string[],
  context: SetContext,
  policy: string,
  names: Names,
): Record<string, unknown> {
  const known = [...set.templates.keys()].sort();
  const validations: Record<string, unknown>[] = [
    {
      expression: `variables.requested.all(n, n in ${celList(known)})`,
      messageExpression: `"unknown sidecar template(s) " + variables.requested.filter(n, !(n in ${celList(known)})).map(n, "\\"" + n + "\\"").join(", ") + " named in annotation ${Keys.templates}; known templates: ${known.join(', ')}"`,
      reason: 'Invalid',
    },
  ];
  if (webhookOnly.length > 0) {
    validations.push({
      expression: `!variables.selected.exists(n, n in ${celList(webhookOnly)})`,
      messageExpression: `"template(s) " + variables.selected.filter(n, n in ${celList(webhookOnly)}).join(", ") + " are injected by the webhook only (sidecar-injector lint --policies says why); install the webhook for them (mode hybrid)"`,
      reason: 'Invalid',
    });
  }
  // The required templates are held on every pod of their namespaces by their own policy (requiredPolicy).
  for (const t of compiled) if (t.required === undefined || !enforcesRequired(names.options)) validations.push(presence(t));
  for (const t of compiled) validations.push(...overrideChecks(t));
  return validatingObject(policy, names, ['CREATE'], {
    matchConditions: [
      { name: 'opted-in', expression: OPTED_IN },
      { name: 'within-bounds', expression: withinBounds(names.options.limits) },
    ],
    variables: [
      { name: 'requested', expression: REQUESTED },
      { name: 'selected', expression: selectedExpr(context) },
      { name: 'inJob', expression: IN_JOB },
    ],
    validations,
  });
}

/** A selected template's cpu and memory overrides must be quantities above zero, as /mutate refuses them (OVERRIDE_REFUSED, quantityRule's words). */
function overrideChecks(t: CompiledTemplate): Record<string, unknown>[] {
  const examples = { cpu: '250m or 1', memory: '128Mi or 1Gi' } as const;
  return t.overrides
    .filter((f): f is QuantityOverride => f === 'cpu' || f === 'memory')
    .map((f) => {
      const key = overrideKey(t.name, f);
      const written = `object.metadata.annotations[${celString(key)}]`;
      const value = `${written}.trim()`;
      const quantityLike = `(${value}.matches(${celString(QUANTITY_PATTERN)}) && !${value}.startsWith("-") && isQuantity(${value}))`;
      return {
        expression: `!(${celString(t.name)} in variables.selected) || !(${celString(key)} in object.metadata.?annotations.orValue({})) || (${quantityLike} && quantity(${value}).isGreaterThan(quantity("0")))`,
        messageExpression: `${quantityLike} ? ${celString(`annotation ${key}: ${f} must be greater than zero`)} : ${celString(`annotation ${key}: "`)} + ${written} + ${celString(`" is not a Kubernetes quantity (for example ${examples[f]})`)}`,
        reason: 'Invalid',
      };
    });
}

/** What `t` adds that a pod must have, as [CEL that holds when it has it, what it is]. */
function checksOf(t: CompiledTemplate): [string, string][] {
  const regular = (n: string): string => `object.spec.containers.exists(c, c.name == ${celString(n)})`;
  const native = (n: string): string =>
    `object.spec.?initContainers.orValue([]).exists(c, c.name == ${celString(n)} && c.?restartPolicy.orValue("") == "Always")`;
  const init = (n: string): string => `object.spec.?initContainers.orValue([]).exists(c, c.name == ${celString(n)})`;
  const checks: [string, string][] = [];
  for (const c of t.spec.initContainers) checks.push([init(c.name), `init container "${c.name}"`]);
  for (const c of t.spec.containers) {
    const where =
      t.nativeMode === NativeSidecar.Always
        ? native(c.name)
        : t.nativeMode === NativeSidecar.JobsOnly
          ? `(variables.inJob ? ${native(c.name)} : ${regular(c.name)})`
          : regular(c.name);
    checks.push([where, `container "${c.name}"`]);
  }
  for (const v of t.spec.volumes) checks.push([`object.spec.?volumes.orValue([]).exists(v, v.name == ${celString(v.name)})`, `volume "${v.name}"`]);
  return checks;
}

/** The CEL list of what the pod lacks of `checks`, each named by `label`. */
function missingOf(checks: readonly [string, string][], label: (what: string) => string): string {
  return `[${checks.map(([ok, what]) => `${ok} ? "" : ${celString(label(what))}`).join(', ')}].filter(m, m != "")`;
}

function presence(t: CompiledTemplate): Record<string, unknown> {
  const checks = checksOf(t);
  const name = celString(t.name);
  return {
    expression: `!(${name} in variables.selected) || (${checks.map(([ok]) => ok).join(' && ')})`,
    messageExpression: `"pod opted in to sidecar injection but is missing: " + ${missingOf(checks, (what) => `${what} of template "${t.name}"`)}.join(", ")`,
    reason: 'Forbidden',
  };
}

/**
 * The counterpart of /validate/required, bound to every pod (requiredBinding): at CREATE, a pod of
 * a namespace where a template is required is refused without its containers (by name, in the
 * list the template puts them in, running the repository of the image the template renders for
 * the pod, and as the template renders them: createCheck) and volumes, with what
 * REQUIRED_SIDECAR_MISSING says; at UPDATE, only an update that
 * changes an image is evaluated (the required webhook's matchCondition), and one that changes a
 * required sidecar's image to anything but the template's, or drops it, is refused with what
 * REQUIRED_SIDECAR_CHANGED says. A pod's own container named like a required sidecar is kept by
 * the MutatingAdmissionPolicy (it adds only what is missing), so the image is what holds it.
 * A required template that does not compile refuses every pod CREATE of its namespaces (the
 * policies cannot add it, and do not let a pod run without it), unless the webhook injects it
 * beside the policies (hybrid). Held by test/policy/parity-required.test.ts (CREATE, through
 * kubeadmit, beside the webhook) and test/policy/required-update.test.ts (UPDATE, with celcost).
 */
export function requiredPolicy(
  required: readonly CompiledTemplate[],
  compiled: readonly CompiledTemplate[],
  policy: string,
  names: Names,
): Record<string, unknown> | undefined {
  // What the required templates' checks read, as variables: evaluated once, read by expression and message alike.
  const variables: Record<string, unknown>[] = [{ name: 'inJob', expression: IN_JOB }];
  const validations = required.flatMap((t, i) => {
    const here = requiredIn(t.required?.namespaceSelector);
    const why = `"template \\"${t.name}\\" is required " + ${t.required?.namespaceSelector === undefined ? '"in every namespace"' : '"in namespace " + request.namespace + " (its namespaceSelector takes it)"'} + " by the platform's spec.required"`;
    if (!compiled.includes(t)) {
      if (names.options.hybrid === true) return [];
      return [
        {
          expression: `request.operation != "CREATE" || !${here}`,
          messageExpression: `${why} + ", and it is injected by the webhook only (sidecar-injector lint --policies says why): install the webhook for it (mode hybrid)"`,
          reason: 'Forbidden',
        },
      ];
    }
    // A template of init containers alone has no sidecar an update could swap (the webhook checks the same).
    const held = heldVariables(t, `required${i}`);
    variables.push(...held.variables);
    return [createCheck(t, here, why, names, held), ...(t.spec.containers.length > 0 ? [updateCheck(t, here, why)] : [])];
  });
  // The apiserver refuses a policy without validations: none is written when nothing is held.
  if (validations.length === 0) return undefined;
  return validatingObject(policy, names, ['CREATE', 'UPDATE'], {
    // As the required validating webhook's: labels, annotations and finalizers are never evaluated;
    // at CREATE nothing of a pod over the bounds (bounds.ts) is walked (the bounds policy refuses
    // it). An UPDATE is never skipped by a bound: its annotations, ownerReferences and ephemeral
    // containers may have grown past theirs since the CREATE (kubectl debug), and an image swap
    // must not pass by it; what it walks, the containers and initContainers, no UPDATE can add to.
    matchConditions: [
      {
        name: 'create-or-image-change',
        expression: `(request.operation == "UPDATE" || (${withinBounds(names.options.limits)})) && (${CREATE_OR_IMAGE_CHANGE})`,
      },
    ],
    variables,
    validations,
  });
}

const CREATE_OR_IMAGE_CHANGE = [
  `request.operation == "CREATE"`,
  `object.spec.containers.map(c, c.?image.orValue("")) != oldObject.spec.containers.map(c, c.?image.orValue(""))`,
  `object.spec.?initContainers.orValue([]).map(c, c.?image.orValue("")) != oldObject.spec.?initContainers.orValue([]).map(c, c.?image.orValue(""))`,
].join(' || ');

/** A required sidecar, written per list the template may put it in (`native`: initContainers, restartPolicy Always). */
interface Sidecar {
  readonly name: string;
  readonly image: string;
  /** The container as the template writes it. */
  readonly container: Container;
  /** CEL over the pod: the template's choice between the lists (a Job's pod, for nativeSidecar: jobs). */
  readonly pick: (build: (native: boolean) => string) => string;
}

function sidecarsOf(t: CompiledTemplate): Sidecar[] {
  const pick = (build: (native: boolean) => string): string =>
    t.nativeMode === NativeSidecar.Always
      ? build(true)
      : t.nativeMode === NativeSidecar.JobsOnly
        ? `(variables.inJob ? ${build(true)} : ${build(false)})`
        : build(false);
  return t.spec.containers.map((c) => ({ name: c.name, image: String(c['image'] ?? ''), container: c, pick }));
}

const listOf = (native: boolean, of = 'object'): string => (native ? `${of}.spec.?initContainers.orValue([])` : `${of}.spec.containers`);
const kindOf = (native: boolean): string => (native ? 'native sidecar' : 'container');
const IMAGE = 'x.?image.orValue("")';
/** CEL: the pod's item of that name in `list` (the first; the apiserver refuses a pod with two). */
const imageIn = (list: string, name: string): string => `${list}.filter(x, x.name == ${celString(name)})[0].?image.orValue("")`;

/**
 * At CREATE, the pod holds the template: its init containers and volumes by name, each sidecar by
 * name in its list (native with restartPolicy Always) running the repository of the image the
 * template renders for the pod (sameRepositoryCel, as the webhook's checkContainer compares them),
 * and running as the template renders it, with the template's volumes as it defines them (`held`,
 * heldVariables'), as the webhook's requiredDrift and missingSidecars hold a required sidecar: the
 * MutatingAdmissionPolicy keeps a container or volume the pod already has under the name. Held by
 * test/policy/parity-required.test.ts and test/policy/parity-required-drift.test.ts.
 */
function createCheck(t: CompiledTemplate, here: string, why: string, names: Names, held: Held): Record<string, unknown> {
  const init = (n: string): string => `object.spec.?initContainers.orValue([]).exists(c, c.name == ${celString(n)})`;
  const checks: [string, string][] = t.spec.initContainers.map((c) => [init(c.name), celString(`init container "${c.name}"`)]);
  const named = (s: Sidecar, native: boolean): string =>
    `${listOf(native)}.exists(x, x.name == ${celString(s.name)}${native ? ' && x.?restartPolicy.orValue("") == "Always"' : ''}`;
  const sidecars = sidecarsOf(t);
  for (const s of sidecars) {
    const ok = s.pick((native) => `${named(s, native)} && ${sameRepositoryCel(IMAGE, s.image)})`);
    const what = s.pick(
      (native) =>
        `(${named(s, native)}) ? ${celString(`${kindOf(native)} "${s.name}" with image repository ${repositoryOf(s.image)} (it runs `)} + ${imageIn(listOf(native), s.name)} + ")" : ${celString(`container "${s.name}"`)})`,
    );
    checks.push([ok, what]);
  }
  for (const v of t.spec.volumes) checks.push([`${held.podVolumes}.exists(v, v.name == ${celString(v.name)})`, celString(`volume "${v.name}"`)]);
  for (const d of [...held.sidecars, ...(held.volumes === undefined ? [] : [held.volumes])]) checks.push([`${d} == ""`, d]);
  // A container of the sidecar's name that runs another image or otherwise, or a volume of the
  // template's name that is the pod's own: the mutation keeps it, so adding the policy again would not help.
  const impostor = [
    ...sidecars.map((s) => s.pick((native) => `${named(s, native)} && !${sameRepositoryCel(IMAGE, s.image)})`)),
    ...held.sidecars.map((d) => `${d} != ""`),
  ].join(' || ');
  const installed = celString(`; the MutatingAdmissionPolicy ${names.policy(t.name)} adds it at CREATE: check that it and its binding are installed`);
  const ownVolume =
    held.volumes === undefined
      ? installed
      : `(${held.volumes} == "" ? ${installed} : ${celString(`; the MutatingAdmissionPolicy ${names.policy(t.name)} never replaces a volume of the pod that has a template volume's name: rename or remove the pod's own volume`)})`;
  const advice =
    impostor === ''
      ? ownVolume
      : `(${impostor} ? ${celString(`; the MutatingAdmissionPolicy ${names.policy(t.name)} never replaces a container of the pod that has a sidecar's name: rename or remove the pod's own container`)} : ${ownVolume})`;
  return {
    expression: `request.operation != "CREATE" || !${here} || (${checks.map(([ok]) => ok).join(' && ')})`,
    messageExpression: `${why} + ", and the pod lacks it (" + [${checks.map(([ok, what]) => `${ok} ? "" : ${what}`).join(', ')}].filter(m, m != "").join(", ") + ")" + ${advice}`,
    reason: 'Forbidden',
  };
}

/** What createCheck reads of a required template's pod, as policy variables (CEL references to them). */
interface Held {
  readonly variables: readonly { name: string; expression: string }[];
  /** The pod's volumes of the template's volumes' names. */
  readonly podVolumes: string;
  /** Per sidecar with something to compare: how it runs otherwise than the template renders it, or "" (sidecarDrift). */
  readonly sidecars: readonly string[];
  /** The template's volumes the pod holds with other values, or "" (volumeDrift); undefined when nothing is compared. */
  readonly volumes: string | undefined;
}

/**
 * The policy variables, named from `prefix`, that createCheck reads for a required template. As
 * variables they are written once and evaluated once per review, however many expressions read
 * them (the apiserver bounds each expression's length, and charges each evaluation); the pod's
 * volumes of the template's names are picked in one pass (a map lookup each), so that no check
 * walks the pod's whole list once per template volume. test/policy/required-cost.test.ts holds
 * the cost on the widest pod the bounds let through.
 */
function heldVariables(t: CompiledTemplate, prefix: string): Held {
  const variables: { name: string; expression: string }[] = [];
  const add = (name: string, expression: string): string => {
    variables.push({ name: `${prefix}${name}`, expression });
    return `variables.${prefix}${name}`;
  };
  const podVolumes = add(
    'PodVolumes',
    `object.spec.?volumes.orValue([]).filter(v, ${oneOf(
      'v.name',
      t.spec.volumes.map((v) => v.name),
    )})`,
  );
  const sidecars = sidecarsOf(t).flatMap((s, j) => {
    const drift = sidecarDrift(s);
    return drift === undefined ? [] : [add(`Sidecar${j}`, drift)];
  });
  const volumes = volumeChecks(t, podVolumes).length > 0 ? add('Volumes', volumeDrift(t, podVolumes)) : undefined;
  return { variables, podVolumes, sidecars, volumes };
}

/**
 * CEL: how the pod's sidecar that holds by name and repository runs otherwise than the template
 * renders it, in requiredDrift's words for the first difference, or "". As the webhook's
 * requiredDrift compares them: the same command, args and workingDir; for each env var of the
 * template, the pod's last of that name (the one the kubelet sets) with the template's value or
 * valueFrom (leafChecks); at each mountPath of the template, a mount with the template's volume
 * name, readOnly and subPath. What the template leaves unset, and what other admission adds (env
 * vars, mounts, resources, probes, a tag or digest, the apiserver's defaults), is not compared.
 * Undefined for a sidecar with nothing to compare.
 */
function sidecarDrift(s: Sidecar): string | undefined {
  const c = s.container;
  const fields = [...listChecks(c), ...envChecks(c), ...mountChecks(c)];
  if (fields.length === 0) return undefined;
  const holds = (native: boolean): string =>
    `x.name == ${celString(s.name)}${native ? ' && x.?restartPolicy.orValue("") == "Always"' : ''} && ${sameRepositoryCel(IMAGE, s.image)}`;
  const hows = `[${fields.map(([ok, how]) => `${ok} ? "" : ${how}`).join(', ')}].filter(m, m != "")`;
  // The sidecar's env vars and mounts the template names, in one pass each (bound as envs, mounts):
  // each check then walks those alone, not the whole of lists the pod decides the length of.
  const envs = `x.?env.orValue([]).filter(e, ${oneOf(
    'e.name',
    (c.env ?? []).map((e) => e.name),
  )})`;
  const mounts = `x.?volumeMounts.orValue([]).filter(m, ${oneOf(
    'm.mountPath',
    (c.volumeMounts ?? []).map((m) => m.mountPath),
  )})`;
  const drift = `[${envs}].map(envs, [${mounts}].map(mounts, ${hows})[0])[0]`;
  return s.pick(
    (native) =>
      `(${listOf(native)}.filter(x, ${holds(native)}).map(x, ${drift}).filter(d, d.size() > 0).map(d, ${celString(`container "${s.name}" as its template renders it (`)} + d[0] + ")") + [""])[0]`,
  );
}

/** CEL: `subject` (a CEL string) is one of `texts` as the template renders them: a map's keys for literal texts (one lookup), a list for the rest. */
function oneOf(subject: string, texts: readonly string[]): string {
  const literal = [...new Set(texts.filter((t) => placeholderCel(t) === celString(t)))];
  const rendered = texts.filter((t) => !literal.includes(t)).flatMap((t) => knownCel(t) ?? []);
  const parts = [
    ...(literal.length > 0 ? [`${subject} in {${literal.map((t) => `${celString(t)}: true`).join(', ')}}`] : []),
    ...(rendered.length > 0 ? [`${subject} in [${rendered.join(', ')}]`] : []),
  ];
  return parts.length === 0 ? 'false' : parts.join(' || ');
}

/** CEL: the template's volumes the pod holds (in `podVolumes`) with other values, as `volume "name" as its template defines it`, joined; "" when none. */
function volumeDrift(t: CompiledTemplate, podVolumes: string): string {
  return `[${volumeChecks(t, podVolumes)
    .map(([ok, what]) => `${ok} ? "" : ${what}`)
    .join(', ')}].filter(m, m != "").join(", ")`;
}

/** command and args as lists of strings, workingDir as a string: the pod's must be the template's (absent and empty alike). */
function listChecks(c: Container): [string, string][] {
  const checks: [string, string][] = [];
  for (const field of ['command', 'args'] as const) {
    const want = ((c as Record<string, unknown>)[field] as string[] | undefined) ?? [];
    const rendered = want.map(knownCel);
    if (rendered.some((r) => r === undefined)) continue;
    const ok = want.length === 0 ? `size(x.?${field}.orValue([])) == 0` : `x.?${field}.orValue([]) == [${rendered.join(', ')}]`;
    const template = want.length === 0 ? '"none"' : shownList(`[${rendered.join(', ')}]`);
    checks.push([
      ok,
      `"the pod's container has ${field} " + (x.?${field}.hasValue() ? ${shownList(`x.${field}`)} : "none") + " where the template has " + ${template}`,
    ]);
  }
  const dir = (c as Record<string, unknown>)['workingDir'];
  const rendered = typeof dir === 'string' ? knownCel(dir) : '""';
  if (rendered !== undefined) {
    const template = typeof dir === 'string' ? `"\\"" + ${rendered} + "\\""` : '"none"';
    checks.push([
      `x.?workingDir.orValue("") == ${rendered}`,
      `"the pod's container has workingDir " + (x.?workingDir.hasValue() ? ${clipCel('"\\"" + x.workingDir + "\\""')} : "none") + " where the template has " + ${template}`,
    ]);
  }
  return checks;
}

/** Each env var of the template: the pod's last of its name (in envs, sidecarDrift's) is there, with the template's value or valueFrom. */
function envChecks(c: Container): [string, string][] {
  return (c.env ?? []).flatMap((e): [string, string][] => {
    const { name, ...rest } = e;
    const named = knownCel(name);
    if (named === undefined) return [];
    const same = leafChecks(rest, 'e');
    const last = `l.size() > 0${same.length === 0 ? '' : ` && [l[l.size() - 1]].all(e, ${same.join(' && ')})`}`;
    return [[`[envs.filter(e, e.name == ${named})].all(l, ${last})`, celString(`the pod's container sets env var ${clip(name, SHOWN)} otherwise`)]];
  });
}

/** Each mount of the template: the pod mounts (in mounts, sidecarDrift's) the template's volume at its mountPath, with its readOnly, subPath and the rest. */
function mountChecks(c: Container): [string, string][] {
  return (c.volumeMounts ?? []).flatMap((m): [string, string][] => {
    const { mountPath, ...rest } = m;
    const path = knownCel(mountPath);
    if (path === undefined) return [];
    const same = leafChecks(rest, 'm');
    return [
      [
        `mounts.exists(m, m.mountPath == ${path}${same.map((s) => ` && ${s}`).join('')})`,
        celString(`the pod's container mounts ${clip(mountPath, SHOWN)} otherwise`),
      ],
    ];
  });
}

/** Each volume of the template that has something to compare: the pod's of its name (in `podVolumes`) holds the template's values (leafChecks). */
function volumeChecks(t: CompiledTemplate, podVolumes: string): [string, string][] {
  return t.spec.volumes.flatMap((volume): [string, string][] => {
    const { name, ...rest } = volume;
    const same = leafChecks(rest, 'v');
    if (same.length === 0) return [];
    return [[`${podVolumes}.all(v, v.name != ${celString(name)} || (${same.join(' && ')}))`, celString(`volume "${name}" as its template defines it`)]];
  });
}

/** The most characters of a pod's value a denial shows, as the webhook's requiredDrift shows them. */
const SHOWN = 100;
/** Fields of resource.Quantity, which the apiserver may write otherwise than the template: not compared. */
const QUANTITIES = new Set(['divisor', 'sizeLimit']);
/** Field names written as `.?name` in CEL; the rest (none in the core/v1 items compared) are not compared. */
const FIELD = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * CEL conditions over `at` (an optional, or an item) that hold when every string, boolean and
 * integer the template's `value` sets is the pod's, zero values matching an absent field, as the
 * webhook's isSubset compares them. Lists, quantities and strings that read the pod's name
 * (knownCel) are not compared: a check the policy cannot make soundly is left out, never guessed.
 */
function leafChecks(value: unknown, at: string): string[] {
  if (typeof value === 'string') {
    const want = knownCel(value);
    return want === undefined ? [] : [`${at}.orValue("") == ${want}`];
  }
  if (typeof value === 'boolean') return [`${at}.orValue(false) == ${String(value)}`];
  if (typeof value === 'number') return Number.isInteger(value) ? [`${at}.orValue(0) == ${value}`] : [];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  return Object.entries(value)
    .filter(([k]) => FIELD.test(k) && !QUANTITIES.has(k))
    .flatMap(([k, v]) => leafChecks(v, `${at}.?${k}`));
}

/**
 * The template's text as the pod gets it (placeholderCel, as the mutation renders it), or undefined
 * when it reads the pod's name: the apiserver names a controller's pod after mutating admission, so
 * the MutatingAdmissionPolicy rendered its generateName and this check would see the name. Such a
 * field is not compared (docs/policies.md says so).
 */
function knownCel(text: string): string | undefined {
  return placeholdersOf(text).includes('pod.name') ? undefined : placeholderCel(text);
}

/** CEL: a list of strings (CEL) shown as JSON would show simple strings, clipped as the webhook clips. */
function shownList(list: string): string {
  return clipCel(`"[" + ${list}.map(s, "\\"" + s + "\\"").join(",") + "]"`);
}

/** CEL: a CEL string clipped to SHOWN characters, as src/log.ts's clip does. */
function clipCel(text: string): string {
  return `[${text}].map(t, t.size() <= ${SHOWN} ? t : t.substring(0, ${SHOWN}) + "...(" + string(t.size() - ${SHOWN}) + " more)")[0]`;
}

/**
 * At UPDATE, each sidecar the old pod has (by name, in its list) is still there, running the old
 * pod's image or the template's (sameImageCel: repository, tag and digest, as the webhook's
 * verifyUpdate compares them); every other change is allowed.
 */
function updateCheck(t: CompiledTemplate, here: string, why: string): Record<string, unknown> {
  const sidecars = sidecarsOf(t);
  const kept = (s: Sidecar): string =>
    s.pick(
      (native) =>
        `${listOf(native, 'oldObject')}.filter(o, o.name == ${celString(s.name)}).all(o, ${listOf(native)}.exists(x, x.name == ${celString(s.name)} && (${IMAGE} == o.?image.orValue("") || ${sameImageCel(IMAGE, s.image)})))`,
    );
  const change = (s: Sidecar): string =>
    s.pick(
      (native) =>
        `(${listOf(native)}.exists(x, x.name == ${celString(s.name)}) ? ${celString(`sets the image of its ${kindOf(native)} "${s.name}" to `)} + ${imageIn(listOf(native), s.name)} + " (the template injects " + ${renderedImage(s.image)} + ")" : ${celString(`removes its ${kindOf(native)} "${s.name}"`)})`,
    );
  return {
    expression: `request.operation != "UPDATE" || !${here} || (${sidecars.map(kept).join(' && ')})`,
    messageExpression: `${why} + ", and this update " + [${sidecars.map((s) => `${kept(s)} ? "" : ${change(s)}`).join(', ')}].filter(m, m != "")[0] + "; leave its image as the template injects it (the platform changes it by changing the template, for new pods)"`,
    reason: 'Forbidden',
  };
}

/**
 * The counterpart of the webhook's refusal of a pod over its limits (POD_OVER_LIMIT): a pod over a
 * bound (bounds.ts) is left alone by every other policy, and refused here with one line. Bound as
 * the policies that could change the pod are: by the validating policy's bindings (matchConditions
 * take the opted-in pods), or, where `changed` is given (bound to every pod), for the pods it holds
 * for: a matchCondition cannot say so, as the apiserver gives matchConditions no namespaceObject
 * (webhook/matchconditions/matcher.go passes none), and the bindings' opt-in reads the namespace.
 */
export function boundsPolicy(policy: string, names: Names, changed?: string): Record<string, unknown> {
  const validations = boundsValidations(names.options.limits);
  return validatingObject(policy, names, ['CREATE'], {
    ...(changed === undefined
      ? { matchConditions: [{ name: 'opted-in', expression: OPTED_IN }], validations }
      : {
          variables: [{ name: 'changed', expression: changed }],
          validations: validations.map((v) => ({ ...v, expression: `!variables.changed || (${String(v['expression'])})` })),
        }),
  });
}

/** A ValidatingAdmissionPolicy of this install: failing closed, matching pod CREATEs (or `operations`), with the rest of its spec. */
function validatingObject(policy: string, names: Names, operations: readonly string[] = ['CREATE'], spec: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: POLICY_API,
    kind: 'ValidatingAdmissionPolicy',
    metadata: names.metadata(policy),
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(names.options, operations),
      ...spec,
    },
  };
}
