import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, type ExecFileSyncOptions } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The CLI as `npm pack` ships it (package.json `files`). What this proves, and what not:
 * - the tarball is made the way a user makes it: every tracked file of the repository copied into
 *   a scratch clone (with the repository's node_modules to build with), plus folders a user keeps untracked, `npm run build`'s output (tsc with
 *   tsconfig.build.json, then the stamp), then `npm pack`; only the compiled CLI, its build stamp,
 *   the bundled templates, package.json, README.md and LICENSE go in;
 * - unpacked into an empty folder, its runtime dependencies installed with `npm ci --omit=dev
 *   --offline` (the lock file copied beside it: `npm pack` never ships one; from npm's cache, which
 *   CI's own `npm ci` fills), the bin runs `version`, `lint` and `inject` on what the package ships,
 *   so nothing it reads at run time is missing and no devDependency is needed. When npm's cache
 *   lacks a dependency (a machine that never ran `npm ci`), the repository's node_modules stand in,
 *   which then proves only the file list, and the test says so in its diagnostics.
 * - it does not prove that the npm registry serves the dependencies (no network here).
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGED = /^(package\.json|README\.md|LICENSE|dist\/build-info\.json|dist\/src\/.+\.js|templates\/[^/]+\.yaml)$/;

const sh = (file: string, args: readonly string[], options: ExecFileSyncOptions = {}): string =>
  execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024, ...options }) as string;

describe('npm package', () => {
  it('ships the CLI, its templates, README and LICENSE only, and its bin runs from an empty folder', { timeout: 600_000 }, (t) => {
    const scratch = mkdtempSync(join(tmpdir(), 'pack-'));
    try {
      const clone = join(scratch, 'clone');
      for (const file of sh('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT })
        .split('\0')
        .filter((f) => f !== '' && f !== 'node_modules')) {
        mkdirSync(dirname(join(clone, file)), { recursive: true });
        cpSync(join(ROOT, file), join(clone, file));
      }
      symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'));
      // A user's own untracked folders, which `npm pack` would take without a files list.
      mkdirSync(join(clone, 'my-notes'));
      writeFileSync(join(clone, 'my-notes', 'secrets.txt'), 'not for the registry\n');
      sh(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(clone, 'tsconfig.build.json')]);
      sh(process.execPath, [join(clone, 'dist', 'src', 'build', 'stamp.js')]);

      const [packed] = JSON.parse(sh('npm', ['pack', '--json', '--pack-destination', scratch, '--ignore-scripts'], { cwd: clone })) as {
        filename: string;
        files: { path: string }[];
      }[];
      const files = packed!.files.map((f) => f.path).sort();
      assert.deepEqual(
        files.filter((f) => !PACKAGED.test(f)),
        [],
        'nothing but the CLI, its templates, README.md and LICENSE',
      );
      for (const needed of ['package.json', 'README.md', 'LICENSE', 'dist/build-info.json', 'dist/src/cli/index.js', 'templates/proxy.yaml'])
        assert.ok(files.includes(needed), needed);
      const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
      assert.ok(files.includes(pkg.bin['sidecar-injector']!), 'the bin is packed');

      const empty = join(scratch, 'empty');
      mkdirSync(empty);
      sh('tar', ['-xzf', join(scratch, packed!.filename), '-C', empty]);
      const installed = join(empty, 'package');
      cpSync(join(ROOT, 'package-lock.json'), join(installed, 'package-lock.json'));
      try {
        sh('npm', ['ci', '--omit=dev', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: installed });
      } catch (err) {
        t.diagnostic(
          `npm ci --offline failed (${String((err as { stderr?: unknown }).stderr ?? err).split('\n')[0]}); running the bin with the repository's node_modules`,
        );
        symlinkSync(join(ROOT, 'node_modules'), join(installed, 'node_modules'));
      }
      const bin = join(installed, pkg.bin['sidecar-injector']!);
      const cli = (args: readonly string[]): string => sh(process.execPath, [bin, ...args], { cwd: empty });

      assert.match(cli(['version']), /^sidecar-injector 0\.\d+\.\d+/);
      assert.match(cli(['lint', join(installed, 'templates')]), /2 template\(s\) OK/);
      writeFileSync(
        join(empty, 'pod.yaml'),
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {sidecar-injector.io/inject: "true"}}\nspec: {containers: [{name: app, image: nginx}]}\n',
      );
      const injected = cli(['inject', '-f', join(empty, 'pod.yaml'), '--templates-dir', join(installed, 'templates')]);
      assert.match(injected, /name: app/);
      assert.ok(injected.split('name:').length > 3, 'the bundled templates add their containers');
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
