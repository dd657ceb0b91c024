import { kustomizeObjects, kustomizeWithComponent } from '../manifests/render.js';
import { revisionSuite } from './revisions.js';

revisionSuite('kustomize manifests/base + components/revision', () => ({
  byDefault: kustomizeObjects('base'),
  canary: kustomizeWithComponent('base', 'components/revision'),
}));
