import { Keys } from '../inject/keys.js';
import type { TemplateSet } from '../templates/load.js';
import { overrideKey } from '../templates/override-keys.js';
import { QUANTITY_PATTERN } from '../templates/schema.js';
import { NativeSidecar, type CompiledTemplate } from '../templates/template.js';
import { enforcesRequired, matchConstraints, POLICY_API, type Names } from './bindings.js';
import { boundsValidations, withinBounds } from './bounds.js';
import { celString } from './cel.js';
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
 * the pod) and volumes, with what REQUIRED_SIDECAR_MISSING says; at UPDATE, only an update that
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
  const validations = required.flatMap((t) => {
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
    return [createCheck(t, here, why, names), ...(t.spec.containers.length > 0 ? [updateCheck(t, here, why)] : [])];
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
    variables: [{ name: 'inJob', expression: IN_JOB }],
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
  return t.spec.containers.map((c) => ({ name: c.name, image: String(c['image'] ?? ''), pick }));
}

const listOf = (native: boolean, of = 'object'): string => (native ? `${of}.spec.?initContainers.orValue([])` : `${of}.spec.containers`);
const kindOf = (native: boolean): string => (native ? 'native sidecar' : 'container');
const IMAGE = 'x.?image.orValue("")';
/** CEL: the pod's item of that name in `list` (the first; the apiserver refuses a pod with two). */
const imageIn = (list: string, name: string): string => `${list}.filter(x, x.name == ${celString(name)})[0].?image.orValue("")`;

/**
 * At CREATE, the pod holds the template: its init containers and volumes by name, each sidecar by
 * name in its list (native with restartPolicy Always) running the repository of the image the
 * template renders for the pod (sameRepositoryCel, as the webhook's checkContainer compares them).
 */
function createCheck(t: CompiledTemplate, here: string, why: string, names: Names): Record<string, unknown> {
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
  for (const v of t.spec.volumes) checks.push([`object.spec.?volumes.orValue([]).exists(v, v.name == ${celString(v.name)})`, celString(`volume "${v.name}"`)]);
  // A container of the sidecar's name that runs another image: the mutation keeps it, so adding the policy again would not help.
  const impostor = sidecars.map((s) => s.pick((native) => `${named(s, native)} && !${sameRepositoryCel(IMAGE, s.image)})`)).join(' || ');
  const advice =
    sidecars.length === 0
      ? celString(`; the MutatingAdmissionPolicy ${names.policy(t.name)} adds it at CREATE: check that it and its binding are installed`)
      : `(${impostor} ? ${celString(`; the MutatingAdmissionPolicy ${names.policy(t.name)} never replaces a container of the pod that has a sidecar's name: rename or remove the pod's own container`)} : ${celString(`; the MutatingAdmissionPolicy ${names.policy(t.name)} adds it at CREATE: check that it and its binding are installed`)})`;
  return {
    expression: `request.operation != "CREATE" || !${here} || (${checks.map(([ok]) => ok).join(' && ')})`,
    messageExpression: `${why} + ", and the pod lacks it (" + [${checks.map(([ok, what]) => `${ok} ? "" : ${what}`).join(', ')}].filter(m, m != "").join(", ") + ")" + ${advice}`,
    reason: 'Forbidden',
  };
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
