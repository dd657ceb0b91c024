import jsonpatch, { JsonPatchError, type Operation } from 'fast-json-patch';
import { InjectorError } from '../errors.js';
import { escapeToken } from './pointer.js';

export type { Operation };

/**
 * Applies a JSON patch to a copy of `doc` the way the kube-apiserver applies a mutating webhook's
 * answer (evanphx/json-patch v4, mutating/dispatcher.go): every operation is validated, so an `add`
 * under a missing parent, a position past the end of a list or a `replace` of nothing fails instead
 * of being guessed. Neither `doc` nor `ops` is modified. Throws PATCH_NOT_APPLICABLE, naming the operation.
 */
export function applyJsonPatch<T>(doc: T, ops: readonly Operation[]): T {
  // The applied document holds the operations' values by reference, so later operations would
  // change them: the patch is cloned first, as fast-json-patch's README says to.
  const patch = jsonpatch.deepClone(ops) as Operation[];
  try {
    return jsonpatch.applyPatch(doc, patch, true, false).newDocument;
  } catch (err) {
    if (!(err instanceof JsonPatchError)) throw err;
    // The error's own index is 0 for a failed validation (fast-json-patch 3.1); its operation is ours.
    const index = patch.indexOf(err.operation as Operation);
    throw new InjectorError(
      'PATCH_NOT_APPLICABLE',
      [index >= 0 ? index : '?', `${err.operation?.op ?? ''} ${err.operation?.path ?? ''}`.trim(), `${err.name}: ${err.message.split('\n')[0] ?? ''}`],
      { cause: err },
    );
  }
}

/** The operations of an AdmissionResponse's `patch` (base64 of a JSON patch); none when it has no patch. */
export function decodePatch(base64: string | undefined): Operation[] {
  if (base64 === undefined) return [];
  return JSON.parse(Buffer.from(base64, 'base64').toString('utf8')) as Operation[];
}

/** The JSON Pointer (RFC 6901) of a path of keys and list positions, e.g. `/items/0/spec/template`. */
export function pointerOf(path: readonly (string | number)[]): string {
  return path.map((key) => `/${escapeToken(String(key))}`).join('');
}

/** The same operations on a document that holds their target at `path`. */
export function underPath(ops: readonly Operation[], path: readonly (string | number)[]): Operation[] {
  const prefix = pointerOf(path);
  return prefix === '' ? [...ops] : ops.map((op) => ({ ...op, path: `${prefix}${op.path}` }));
}
