import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cli } from '../helpers/cli.js';

/**
 * The README's "A first template" as a newcomer follows it: its template written where it says,
 * every `$ sidecar-injector ...` line of its sample session run through the real CLI from a folder
 * holding that template and the repository's examples/, and each output printed under a command
 * compared with what the CLI prints, line for line.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The fenced blocks of the README, with their info string. */
const blocks = [...README.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }));

/** Commands of a sample session: the line after `$ `, and the output lines up to the next command. */
function session(text: string): { args: string[]; output: string[] }[] {
  const out: { args: string[]; output: string[] }[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('$ sidecar-injector '))
      out.push({
        args: line
          .slice('$ sidecar-injector '.length)
          .replace(/\s+#.*$/, '')
          .trim()
          .split(/\s+/),
        output: [],
      });
    else if (line !== '' && out.length > 0) out.at(-1)!.output.push(line);
  }
  return out;
}

describe('README sample outputs', () => {
  const cwd = process.cwd();
  const dir = mkdtempSync(join(tmpdir(), 'readme-'));
  before(() => {
    const template = blocks.find((b) => b.lang === 'yaml' && b.text.startsWith('# my-templates/'));
    assert.ok(template, 'the README writes a template into my-templates/');
    const file = /^# (\S+)/.exec(template.text)![1]!;
    mkdirSync(join(dir, dirname(file)), { recursive: true });
    writeFileSync(join(dir, file), template.text);
    cpSync(join(ROOT, 'examples'), join(dir, 'examples'), { recursive: true });
    process.chdir(dir);
  });
  after(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints what the CLI prints for every command of "A first template"', async () => {
    const sessions = blocks.filter((b) => b.lang === 'text' && b.text.includes('$ sidecar-injector lint my-templates/'));
    assert.equal(sessions.length, 1);
    const commands = session(sessions[0]!.text);
    assert.ok(commands.length >= 3);
    for (const { args, output } of commands) {
      const r = await cli(args);
      assert.equal(r.code, 0, `sidecar-injector ${args.join(' ')}: ${r.err}`);
      if (output.length === 0) continue;
      assert.deepEqual(r.out.trimEnd().split('\n'), output, `sidecar-injector ${args.join(' ')}`);
    }
  });

  it('states no test count, which every added test would make stale', () => {
    assert.doesNotMatch(README, /\b\d{3,} tests\b/);
  });
});
