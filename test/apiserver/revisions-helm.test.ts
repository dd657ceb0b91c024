import { helmObjects } from '../manifests/render.js';
import { revisionSuite } from './revisions.js';

revisionSuite('helm template --set revision=canary', () => ({ byDefault: helmObjects(), canary: helmObjects({ set: { revision: 'canary' } }) }));
