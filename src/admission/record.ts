import { isObject } from '../kube/types.js';
import type { AdmissionRequest } from './codec.js';

/** What the log line and the metrics say about a review, whatever its answer. */
export interface ReviewFacts {
  readonly uid: string;
  readonly operation: string;
  /** request.namespace, else the pod's own (controller-made pods often carry none). */
  readonly namespace: string;
  /** The pod's name, else its generateName, else request.name. */
  readonly pod: string;
}

/** The facts of a decoded review; only string fields are taken from the object. */
export function reviewFacts(req: AdmissionRequest): ReviewFacts {
  const object = isObject(req.object) ? req.object : undefined;
  const meta = object !== undefined && isObject(object['metadata']) ? object['metadata'] : undefined;
  const text = (value: unknown): string => (typeof value === 'string' ? value : '');
  return {
    uid: req.uid,
    operation: req.operation ?? '',
    namespace: req.namespace || text(meta?.['namespace']),
    pod: text(meta?.['name']) || text(meta?.['generateName']) || (req.name ?? ''),
  };
}
