/** The annotation keys of per-pod overrides, `<template>.sidecar-injector.io/<field>`, and finding them on a pod: what a template adds there is known when it compiles (template.ts), what they change is inject/overrides.ts. */

/** The annotation that overrides `field` of `template`. */
export function overrideKey(template: string, field: string): string {
  return `${template}.sidecar-injector.io/${field}`;
}

const PREFIX_TAIL = overrideKey('', '');

/** Annotations `[key, value]` under each template's prefix, by template name (overrideAnnotations). */
export type OverrideAnnotations = ReadonlyMap<string, readonly (readonly [string, string])[]>;

/**
 * The annotations under `<template>.sidecar-injector.io/` in `maps` (the pod's, then those the
 * templates add), by template, in one walk however many templates are selected (a pod
 * may carry thousands of annotations). Template names hold no `/`, so a key is under a template's
 * prefix exactly when the text before its first `/` is `<template>.sidecar-injector.io`.
 */
export function overrideAnnotations(...maps: readonly (Readonly<Record<string, string>> | undefined)[]): OverrideAnnotations {
  const found = new Map<string, [string, string][]>();
  for (const annotations of maps) {
    for (const key in annotations) {
      const slash = key.indexOf('/');
      if (slash < 0 || !key.startsWith(PREFIX_TAIL, slash + 1 - PREFIX_TAIL.length)) continue;
      const name = key.slice(0, slash + 1 - PREFIX_TAIL.length);
      const list = found.get(name) ?? [];
      list.push([key, annotations[key]!]);
      found.set(name, list);
    }
  }
  return found;
}
