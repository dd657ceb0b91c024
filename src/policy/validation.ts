import { Keys } from '../inject/keys.js';
import type { TemplateSet } from '../templates/load.js';
import { overrideKey } from '../templates/override-keys.js';
import { QUANTITY_PATTERN } from '../templates/schema.js';
import { NativeSidecar, type CompiledTemplate } from '../templates/template.js';
import { enforcesRequired, matchConstraints, POLICY_API, type Names } from './bindings.js';
import { boundsValidations, withinBounds } from './bounds.js';
import { celString } from './cel.js';
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
  return {
    apiVersion: POLICY_API,
    kind: 'ValidatingAdmissionPolicy',
    metadata: names.metadata(policy),
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(names.options),
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
    },
  };
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
 * The counterpart of /validate/required, bound to every pod (requiredBinding): a pod of a namespace
 * where a template is required is refused without its containers and volumes, with what
 * REQUIRED_SIDECAR_MISSING says. A required template that does not compile refuses every pod of
 * its namespaces (the policies cannot add it, and do not let a pod run without it), unless the
 * webhook injects it beside the policies (hybrid).
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
          expression: `!${here}`,
          messageExpression: `${why} + ", and it is injected by the webhook only (sidecar-injector lint --policies says why): install the webhook for it (mode hybrid)"`,
          reason: 'Forbidden',
        },
      ];
    }
    const checks = checksOf(t);
    return [
      {
        expression: `!${here} || (${checks.map(([ok]) => ok).join(' && ')})`,
        messageExpression: `${why} + ", and the pod lacks it (" + ${missingOf(checks, (what) => what)}.join(", ") + "); the MutatingAdmissionPolicy ${names.policy(t.name)} adds it at CREATE: check that it and its binding are installed"`,
        reason: 'Forbidden',
      },
    ];
  });
  // The apiserver refuses a policy without validations: none is written when nothing is held.
  if (validations.length === 0) return undefined;
  return {
    apiVersion: POLICY_API,
    kind: 'ValidatingAdmissionPolicy',
    metadata: names.metadata(policy),
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(names.options),
      matchConditions: [{ name: 'within-bounds', expression: withinBounds(names.options.limits) }],
      variables: [{ name: 'inJob', expression: IN_JOB }],
      validations,
    },
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
  return {
    apiVersion: POLICY_API,
    kind: 'ValidatingAdmissionPolicy',
    metadata: names.metadata(policy),
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(names.options),
      ...(changed === undefined
        ? { matchConditions: [{ name: 'opted-in', expression: OPTED_IN }], validations }
        : {
            variables: [{ name: 'changed', expression: changed }],
            validations: validations.map((v) => ({ ...v, expression: `!variables.changed || (${String(v['expression'])})` })),
          }),
    },
  };
}
