import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { endpointLabel, Endpoints } from '../../src/admission/endpoints.js';
import { createHandlers } from '../../src/admission/handlers.js';
import { templates } from '../helpers/templates.js';

describe('the endpoint table', () => {
  it('gives every path a handler, and the metrics their label from its kind', () => {
    const handlers = createHandlers({ templates: () => templates });
    assert.deepEqual(
      [...handlers.byPath.keys()],
      Endpoints.map((e) => e.path),
    );
    assert.deepEqual(['/mutate', '/validate', '/mutate/namespace', '/validate/namespace', '/validate/sidecartemplates'].map(endpointLabel), [
      'mutate',
      'validate',
      'mutate',
      'validate',
      'sidecartemplate',
    ]);
  });

  it('labels any other path other, so a scanner adds no time series', () => {
    assert.deepEqual(['/', '/mutate/', '/inject', '/validate/namespace/x', '__proto__'].map(endpointLabel), ['other', 'other', 'other', 'other', 'other']);
  });
});
