/**
 * Where a template's containers go in the pod's list: `first`, `last`, or next to a named container
 * (another injector's, or the application's). The pod's own entries are never moved: the injector
 * only inserts, so the JSON patch stays one `add` per sidecar and a re-invoked review changes nothing.
 */
export type Placement = 'first' | 'last' | { readonly before: string } | { readonly after: string };

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const HELP = 'placement must be "first", "last", {before: CONTAINER} or {after: CONTAINER}';

/** Checks a `spec.placement` value as written; returns the fault message, or undefined when valid. */
export function placementFault(value: unknown): string | undefined {
  if (value === undefined || value === 'first' || value === 'last') return undefined;
  if (typeof value === 'string') return `${HELP}, got "${value}"`;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return HELP;
  const keys = Object.keys(value);
  const key = keys[0];
  if (keys.length !== 1 || (key !== 'before' && key !== 'after')) return `${HELP}, got keys ${keys.map((k) => `"${k}"`).join(', ') || 'none'}`;
  const name = (value as Record<string, unknown>)[key];
  if (typeof name !== 'string' || !NAME.test(name)) return `placement.${key} must be a container name (DNS-1123 label)`;
  return undefined;
}

/** Inserts `added` into `own` by each item's placement; returns `own` itself when nothing is added. */
export function insertPlaced<T extends { readonly name: string }>(own: readonly T[] | undefined, added: readonly (readonly [T, Placement])[]): T[] | undefined {
  if (added.length === 0) return own === undefined ? undefined : (own as T[]);
  return placeItems(own ?? [], added).map((e) => (typeof e === 'number' ? own![e]! : e));
}

/**
 * The list insertPlaced makes, with each of `own`'s items given as its index in `own`: what the
 * mutating handler walks to write the patch (an item is either the pod's own, at a known index, or
 * one inserted at its place), without a copy of the pod's list of items.
 */
export function placeItems<T extends { readonly name: string }>(own: readonly T[], added: readonly (readonly [T, Placement])[]): (number | T)[] {
  const list: (number | T)[] = [];
  for (let i = 0; i < own.length; i++) list.push(i);
  let firsts = 0; // `first` items keep their template order at the head of the list
  for (const [item, placement] of added) {
    const at = indexFor(list, own, placement, firsts);
    if (placement === 'first' || at < firsts) firsts++;
    list.splice(at, 0, item);
  }
  return list;
}

function indexFor<T extends { readonly name: string }>(list: readonly (number | T)[], own: readonly T[], placement: Placement, firsts: number): number {
  if (placement === 'first') return firsts;
  if (placement === 'last') return list.length;
  // A missing anchor is not an error: the other injector may not have run yet (or at all).
  if ('before' in placement) {
    const i = indexOfName(list, own, placement.before);
    return i < 0 ? list.length : i;
  }
  const i = indexOfName(list, own, placement.after);
  return i < 0 ? list.length : i + 1;
}

function indexOfName<T extends { readonly name: string }>(list: readonly (number | T)[], own: readonly T[], name: string): number {
  for (let i = 0; i < list.length; i++) {
    const e = list[i]!;
    if ((typeof e === 'number' ? own[e]!.name : e.name) === name) return i;
  }
  return -1;
}
