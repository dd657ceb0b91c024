/**
 * A `metadata.managedFields` entry that mirrors an object, as Server-Side Apply writes it
 * (FieldsV1, sigs.k8s.io/structured-merge-diff): `f:<field>` for each field, and for a list of
 * objects with a merge key (a container's or env var's `name`, a port's `containerPort` and
 * `protocol`, a mount's `mountPath`) one `k:{...}` key per item whose value holds `"."` and the
 * item's fields. The apiserver writes the creator's entry before mutating admission
 * (apiserver pkg/endpoints/handlers/create.go: FieldManager.UpdateNoErrors, then Admit), so every
 * review of a pod CREATE carries one, which roughly doubles its JSON nodes and adds a key name per
 * list item. An estimate of what a review holds (`explain`) and test reviews, not SSA itself.
 */
export function managedFieldsOf(object: Record<string, unknown>, manager = 'kubectl-client-side-apply'): Record<string, unknown> {
  return { manager, operation: 'Update', apiVersion: 'v1', time: '2026-11-23T12:00:00Z', fieldsType: 'FieldsV1', fieldsV1: fieldSet(object) };
}

function fieldSet(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {};
  const out: Record<string, unknown> = {};
  for (const [field, v] of Object.entries(value)) {
    if (Array.isArray(v) && v.every((item) => typeof item === 'object' && item !== null && !Array.isArray(item) && mergeKey(item) !== undefined)) {
      const items: Record<string, unknown> = { '.': {} };
      for (const item of v as Record<string, unknown>[]) items[`k:${JSON.stringify(mergeKey(item))}`] = { '.': {}, ...fieldSet(item) };
      out[`f:${field}`] = items;
    } else {
      out[`f:${field}`] = typeof v === 'object' && v !== null && !Array.isArray(v) ? { '.': {}, ...fieldSet(v) } : {};
    }
  }
  return out;
}

/** The item's merge key as the core/v1 schema names it (x-kubernetes-list-map-keys). */
function mergeKey(item: Record<string, unknown>): Record<string, unknown> | undefined {
  if (typeof item['containerPort'] === 'number') return { containerPort: item['containerPort'], protocol: item['protocol'] ?? 'TCP' };
  if (typeof item['mountPath'] === 'string') return { mountPath: item['mountPath'] };
  if (typeof item['name'] === 'string') return { name: item['name'] };
  return undefined;
}
