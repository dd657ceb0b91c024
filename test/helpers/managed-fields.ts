/** The review's managedFields entry, as src/kube/managed-fields.ts estimates it (shared with `explain`). */
export { managedFieldsOf } from '../../src/kube/managed-fields.js';
