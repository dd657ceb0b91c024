import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { relative } from 'node:path';
import { coreDefinitions, generated } from '../../scripts/render-schema.js';

describe('npm run schema (scripts/render-schema.ts)', () => {
  it("has generated the committed core-v1.ts, template-validator.ts and config-validator.ts from the installed libraries, schema.ts and the settings' table", () => {
    // Fails after a dependency upgrade, a change to schema.ts or to the generator, until `npm run schema` is run and committed.
    for (const [path, text] of generated())
      assert.ok(readFileSync(path, 'utf8') === text, `${relative(process.cwd(), path)} is out of date: run npm run schema`);
  });

  it('reads the required fields and enums of the OpenAPI definitions from kubernetes-models, at every depth', () => {
    const defs = coreDefinitions() as Record<string, { required?: string[]; properties: Record<string, { enum?: unknown[]; items?: { enum?: unknown[] } }> }>;
    assert.deepEqual(defs['V1Container']!.required, ['name']);
    assert.deepEqual(defs['V1HTTPGetAction']!.required, ['port']);
    assert.deepEqual(defs['V1KeyToPath']!.required, ['key', 'path']);
    assert.deepEqual(defs['V1Container']!.properties['imagePullPolicy']!.enum, ['Always', 'IfNotPresent', 'Never', null]);
    assert.deepEqual(defs['V1ContainerPort']!.properties['protocol']!.enum, ['SCTP', 'TCP', 'UDP', null]);
    // An enum on the items of a list, inside an ephemeral volume's claim template.
    assert.deepEqual(defs['V1PersistentVolumeClaimSpec']!.properties['accessModes']!.items!.enum, [
      'ReadOnlyMany',
      'ReadWriteMany',
      'ReadWriteOnce',
      'ReadWriteOncePod',
      null,
    ]);
  });

  it("takes every field and its type from client-node's models, and refuses any other", () => {
    const defs = coreDefinitions() as Record<string, { additionalProperties: boolean; properties: Record<string, unknown> }>;
    const probe = defs['V1Probe']!;
    assert.equal(probe.additionalProperties, false);
    assert.deepEqual(probe.properties['httpGet'], { $ref: '#/$defs/V1HTTPGetAction' });
    assert.deepEqual(probe.properties['failureThreshold'], { type: ['integer', 'null'] });
    assert.deepEqual(defs['V1HTTPGetAction']!.properties['port'], { type: ['integer', 'string', 'null'] });
    for (const name of ['V1Volume', 'V1EnvVar', 'V1VolumeMount', 'V1LocalObjectReference', 'V1ProjectedVolumeSource', 'V1ObjectMeta'])
      assert.ok(name in defs, name);
  });
});
