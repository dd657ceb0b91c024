import { InjectorError } from '../errors.js';
import { clip } from '../log.js';
import type { Container } from '../kube/types.js';
import { parseImage } from '../kube-values/image.js';
import { parseQuantity, quantityOf } from '../kube-values/quantity.js';
import { Overridable, QUANTITY_PATTERN, type OverrideField } from '../templates/schema.js';
import type { CompiledTemplate, RenderedTemplate } from '../templates/template.js';
import { overrideKey, type OverrideAnnotations } from '../templates/override-keys.js';

/**
 * Per-pod overrides: `<template>.sidecar-injector.io/image`, `/cpu` and `/memory` annotations change
 * the first container of that template, when the template lists the field in `spec.overrides`.
 * These are the only annotations interpreted, and only an invalid value of an allowed override
 * denies the pod: a template may set any annotation under its own prefix and a pod may
 * carry any annotation, so anything else under the prefix is ignored with a warning (a typo such as
 * `/memroy` is still seen) and never a reason to refuse a pod.
 */
export type Overrides = Partial<Record<OverrideField, string>>;

/** A template's overrides for one pod, and the warnings about its annotations that were ignored. */
export interface OverrideReading {
  readonly overrides: Overrides;
  readonly warnings: readonly string[];
}

const QUANTITY = new RegExp(QUANTITY_PATTERN);
/** Warnings about ignored annotations per template and pod; the rest are counted in one more (the apiserver keeps 4 KiB of warnings). */
const MAX_IGNORED_WARNINGS = 5;

/**
 * Reads a template's override annotations on a pod (its own annotations plus those the selected
 * templates add, as stored). Throws OVERRIDE_REFUSED, naming every problem, only for an invalid
 * value of an override the template allows. An annotation under the template's prefix that is set by
 * one of the `selected` templates or read by one of this template's placeholders is neither an
 * override nor a warning.
 */
export function overridesFor(t: CompiledTemplate, annotations: OverrideAnnotations, selected: readonly CompiledTemplate[] = [t]): OverrideReading {
  const found = annotations.get(t.name);
  if (found === undefined) return NO_OVERRIDES;
  const prefix = overrideKey(t.name, '');
  const overrides: Overrides = {};
  const problems: string[] = [];
  const ignored: string[] = [];
  for (const [key, value] of found) {
    const field = key.slice(prefix.length);
    if (!isField(field) || !t.overrides.includes(field)) {
      const warning = ignoredWarning(t, field, key, selected);
      if (warning !== undefined) ignored.push(warning);
      continue;
    }
    const problem = OverrideRules[field].problem(value.trim(), value, key);
    if (problem === undefined) overrides[field] = value.trim();
    else problems.push(problem);
  }
  if (problems.length > 0) throw new InjectorError('OVERRIDE_REFUSED', [problems.join('; ')]);
  return { overrides, warnings: capped(ignored) };
}

/** The reading of a pod without annotations under the template's prefix: most pods. */
const NO_OVERRIDES: OverrideReading = Object.freeze({ overrides: Object.freeze({}), warnings: Object.freeze([]) });

/** Why an annotation under the template's prefix is not applied, or undefined when it is none of the injector's business. */
function ignoredWarning(t: CompiledTemplate, field: string, key: string, selected: readonly CompiledTemplate[]): string | undefined {
  if (isField(field)) {
    const allowed = t.overrides.length === 0 ? 'it allows none' : `it allows ${t.overrides.join(', ')}`;
    return `annotation ${key}: template "${t.name}" does not allow overriding ${field} (${allowed}); ignored`;
  }
  // The template's own metadata (a version, a checksum) and what its placeholders read are expected.
  if (t.reads.annotations.has(key) || selected.some((s) => Object.hasOwn(s.spec.annotations, key))) return undefined;
  return `annotation ${key}: "${field}" is not an override field (${Overridable.join(', ')}) and template "${t.name}" does not read it; ignored`;
}

function capped(warnings: string[]): readonly string[] {
  if (warnings.length <= MAX_IGNORED_WARNINGS) return warnings;
  const rest = warnings.length - MAX_IGNORED_WARNINGS;
  return [...warnings.slice(0, MAX_IGNORED_WARNINGS), `${rest} more annotation${rest === 1 ? '' : 's'} ignored likewise`];
}

function isField(field: string): field is OverrideField {
  return (Overridable as readonly string[]).includes(field);
}

/** Applies overrides to the first container of a rendered template; returns `r` itself when there are none. */
export function applyOverrides(r: RenderedTemplate, o: Overrides): RenderedTemplate {
  const first = r.containers[0];
  if (first === undefined || Object.keys(o).length === 0) return r;
  let c: Container = first;
  for (const field of Overridable) {
    const value = o[field];
    if (value !== undefined) c = OverrideRules[field].apply(c, value);
  }
  return { ...r, containers: [c, ...r.containers.slice(1)] };
}

/** What an override annotation may hold and what it does to the template's first container. */
interface OverrideRule {
  /** Why the (trimmed) value cannot be applied, or undefined when it can; `written` is the value as the pod wrote it. */
  readonly problem: (value: string, written: string, key: string) => string | undefined;
  readonly apply: (c: Container, value: string) => Container;
}

/**
 * One row per override field (the template schema's `Overridable`, which lists the fields a template
 * may allow in `spec.overrides`); a field without a row does not compile. Applied in that order.
 */
const OverrideRules: { readonly [F in OverrideField]: OverrideRule } = {
  image: {
    // The runtime's own grammar (distribution/reference), so an override the kubelet cannot pull is refused here, with why.
    problem: (value, written, key) => {
      const image = parseImage(value);
      return 'problem' in image ? `annotation ${key}: "${clip(written)}" is not a valid image reference: ${image.problem}` : undefined;
    },
    apply: (c, value) => ({ ...c, image: value }),
  },
  cpu: quantityRule('cpu', '250m or 1'),
  memory: quantityRule('memory', '128Mi or 1Gi'),
};

/** A resource request: a positive Kubernetes quantity; a limit below it is raised to it. */
function quantityRule(resource: 'cpu' | 'memory', example: string): OverrideRule {
  return {
    problem: (value, written, key) => {
      if (!QUANTITY.test(value) || value.startsWith('-')) return `annotation ${key}: "${clip(written)}" is not a Kubernetes quantity (for example ${example})`;
      if (parseQuantity(value)?.nanos === 0n) return `annotation ${key}: ${resource} must be greater than zero`;
      return undefined;
    },
    apply: (c, value) => withRequest(c, resource, value),
  };
}

/** Sets the request; a limit below it is raised to it, so that the pod stays valid (requests <= limits). */
function withRequest(c: Container, resource: 'cpu' | 'memory', quantity: string): Container {
  const resources = (c['resources'] ?? {}) as { requests?: Record<string, string>; limits?: Record<string, string> };
  const requests = { ...resources.requests, [resource]: quantity };
  const limits = isBelow(resources.limits?.[resource], quantity) ? { ...resources.limits, [resource]: quantity } : resources.limits;
  return { ...c, resources: { ...resources, requests, ...(limits !== undefined && { limits }) } };
}

/** Whether a template's limit is below the request (exactly, as the apiserver compares them); a limit it cannot read is left alone. */
function isBelow(limit: unknown, request: string): boolean {
  const [l, r] = [quantityOf(limit), parseQuantity(request)];
  return l !== undefined && r !== undefined && l.nanos < r.nanos;
}
