/**
 * The user documentation (README.md and docs/*.md) against the code it describes: every setting of
 * src/config/config.ts has its row in the settings table of docs/operating.md, with its variable
 * and default, and no row names a setting that is gone; every metric the injector exports has its
 * row in docs/metrics-and-logs.md, and no row names one that is gone; every command of the CLI (one
 * golden help text each, test/fixtures/cli/golden/help/) has its row in docs/cli.md; and every relative link
 * between the pages, down to the heading, leads somewhere.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Options } from '../../src/config/config.js';
import { createMetrics, PREFIX } from '../../src/metrics/metrics.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = join(ROOT, 'docs');
const PAGES = [
  join(ROOT, 'README.md'),
  ...readdirSync(DOCS)
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(DOCS, f)),
];

/** The page's text outside fenced code blocks, where `#` and `](` mean nothing to Markdown. */
function prose(path: string): string {
  return readFileSync(path, 'utf8').replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as dashes, repeats numbered. */
function anchors(path: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, text] of prose(path).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = (text ?? '')
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base);
    seen.set(base, (n ?? -1) + 1);
    out.add(n === undefined ? base : `${base}-${n + 1}`);
  }
  return out;
}

/** The rows of the settings table: its first cell is the flag. */
function settingsRows(): Map<string, string> {
  const text = prose(join(DOCS, 'operating.md'));
  const section = text.slice(text.indexOf('\n## Settings\n'), text.indexOf('\n## ', text.indexOf('\n## Settings\n') + 1));
  return new Map([...section.matchAll(/^\| `--([a-z0-9-]+)` \|(.*)$/gm)].map(([, flag, rest]) => [flag ?? '', rest ?? '']));
}

describe('the user documentation', () => {
  it('has a row for every setting in docs/operating.md, with its variable and default', () => {
    const rows = settingsRows();
    for (const o of Object.values(Options)) {
      const row = rows.get(o.flag);
      assert.ok(row !== undefined, `docs/operating.md, "Settings": no row for --${o.flag}`);
      const cells = row.split(' | ').map((c) => c.trim());
      assert.equal(cells[0], `\`${o.env}\``, `--${o.flag}: variable`);
      const fallback = o.schema.default === '' ? '(none)' : String(o.schema.default);
      assert.equal(cells[1], fallback, `--${o.flag}: default`);
    }
  });

  it('names no setting in the settings table that src/config/config.ts does not have', () => {
    const flags = new Set(Object.values(Options).map((o) => o.flag as string));
    for (const flag of settingsRows().keys()) assert.ok(flags.has(flag), `docs/operating.md, "Settings": --${flag} is not a setting`);
  });

  it('has a row in docs/metrics-and-logs.md for every metric the injector exports, and none for a metric it does not', async () => {
    const exported = (await createMetrics().registry.getMetricsAsJSON())
      .map((m) => m.name)
      .filter((n) => n.startsWith(PREFIX))
      .sort();
    const documented = [...prose(join(DOCS, 'metrics-and-logs.md')).matchAll(/^\| `(sidecar_injector_[a-z_]+)` \|/gm)].map(([, name]) => name ?? '').sort();
    assert.deepEqual(documented, exported);
  });

  it('has a row in the commands table of docs/cli.md for every command of the CLI', () => {
    const commands = readdirSync(join(ROOT, 'test/fixtures/cli/golden/help'))
      .map((f) => f.replace(/\.txt$/, ''))
      .filter((c) => c !== 'sidecar-injector');
    const text = prose(join(DOCS, 'cli.md'));
    const section = text.slice(text.indexOf('\n## Commands\n'), text.indexOf('\n## ', text.indexOf('\n## Commands\n') + 1));
    const documented = new Set([...section.matchAll(/^\| `([a-z-]+)` \|/gm)].map(([, name]) => name));
    assert.deepEqual(
      commands.filter((c) => !documented.has(c)),
      [],
    );
  });

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const [, link] of prose(page).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (link === undefined || /^[a-z]+:/.test(link)) continue;
        const [path = '', anchor] = link.split('#');
        const target = path === '' ? page : resolve(dirname(page), path);
        if (!existsSync(target)) broken.push(`${relative(ROOT, page)}: ${link} (no such file)`);
        else if (anchor !== undefined && target.endsWith('.md') && !anchors(target).has(anchor))
          broken.push(`${relative(ROOT, page)}: ${link} (no such heading)`);
      }
    }
    assert.deepEqual(broken, []);
  });
});
