import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { chartValuesSchema } from '../../scripts/chart-schema.js';
import { Formats, type Format } from '../../src/templates/schema.js';
import { parseKubectl } from '../../src/yaml/kubectl.js';

// Ajv's default dialect is draft-07, the chart schema's, as Helm reads it (Ajv knows the dialect by its http address only).
const { $schema: _dialect, ...schema } = chartValuesSchema();
const validate = new Ajv({ strict: false, allErrors: true }).compile(schema);
const valuesWith = (name: string, template: unknown) => ({ templates: { inline: { [`${name}.yaml`]: template } } });

describe("the chart's values schema (scripts/chart-schema.ts, issue 21)", () => {
  it('takes every bundled template as templates.inline', () => {
    for (const file of readdirSync('templates').filter((f) => f.endsWith('.yaml'))) {
      const [doc] = parseKubectl(readFileSync(`templates/${file}`, 'utf8'));
      assert.ok(validate(valuesWith('t', doc!.value)), `${file}: ${JSON.stringify(validate.errors)}`);
    }
  });

  // [format, where a value of it goes in a template, values to try]
  const cases: [Format, (v: string) => unknown, string[]][] = [
    ['dns1123-label', (v) => ({ name: v, image: 'x' }), ['agent', 'a', 'a-b', 'A', '-a', 'a-', 'a'.repeat(63), 'a'.repeat(64), 'a.b', '']],
    [
      'iana-svc-name',
      (v) => ({ name: 'c', image: 'x', ports: [{ containerPort: 1, name: v }] }),
      ['http', 'h2c', 'a-b', '80', 'a--b', '-a', 'a'.repeat(15), 'a'.repeat(16), 'HTTP', ''],
    ],
    ['quantity', (v) => ({ name: 'c', image: 'x', resources: { requests: { cpu: v } } }), ['100m', '0.5', '1Gi', '1e3', '+1', '-1', 'lots', '1 Gi', '.5', '']],
    ['env-var-name', (v) => ({ name: 'c', image: 'x', env: [{ name: v }] }), ['PATH', 'my.var', 'a b', 'A=B', 'é', '']],
  ];
  for (const [format, place, values] of cases) {
    it(`writes the ${format} format as patterns that accept exactly what the server's format accepts`, () => {
      for (const value of values) {
        const template = { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name: 't' }, spec: { containers: [place(value)] } };
        assert.equal(
          validate(valuesWith('t', template)),
          Formats[format].test(value),
          `${JSON.stringify(value)}: ${JSON.stringify(validate.errors?.map((e) => e.instancePath))}`,
        );
      }
    });
  }
});
