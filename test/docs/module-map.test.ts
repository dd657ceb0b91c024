import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import layering from '../../scripts/layers.json' with { type: 'json' };

/** The rows of the module map in docs/development.md: `| <n> <layer> | \`src/...\` | owns | may import |`. */
function mapRows(): { layer: string; path: string }[] {
  const text = readFileSync('docs/development.md', 'utf8');
  const section = text.slice(text.indexOf('\n## Module map\n'), text.indexOf('\n### ', text.indexOf('\n## Module map\n')));
  return [...section.matchAll(/^\| (\d+ [a-z]+) \| `(src\/[^`]*?)\/?` \|/gm)].map((m) => ({ layer: m[1]!, path: m[2]! }));
}

/** The folders of src/ and its files at the top, as the map and scripts/layers.json name them. */
function srcEntries(): string[] {
  return readdirSync('src', { withFileTypes: true })
    .filter((e) => e.isDirectory() || e.name.endsWith('.ts'))
    .map((e) => `src/${e.name}`)
    .sort();
}

describe('the module map of docs/development.md', () => {
  it('names every folder of src/ and every file at its top, once, and nothing that does not exist', () => {
    const named = mapRows().map((r) => r.path);
    assert.ok(named.length > 0, 'no rows found under "## Module map"');
    for (const path of named) assert.ok(existsSync(path), `the map names ${path}, which does not exist`);
    assert.deepEqual([...named].sort(), srcEntries());
  });

  it('gives each folder the layer the layer check (scripts/layers.json) holds it to', () => {
    const layerOf = new Map(layering.layers.flatMap((l, i) => l.paths.map((p) => [p, `${i + 1} ${l.name}`] as const)));
    assert.deepEqual([...layerOf.keys()].sort(), srcEntries(), 'scripts/layers.json names every entry of src/ once');
    for (const row of mapRows()) assert.equal(row.layer, layerOf.get(row.path), row.path);
  });
});
