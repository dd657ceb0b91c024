import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { STAMP_FILE } from './info.js';

/**
 * Run by `npm run build` after tsc: records the git commit the build came from in dist/build-info.json.
 * $GIT_COMMIT wins (an image build has no .git: `docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD)`);
 * without either, no commit is recorded and `version` says so.
 */
function commit(): string {
  const fromEnv = process.env['GIT_COMMIT'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

const file = join(dirname(fileURLToPath(import.meta.url)), '..', '..', STAMP_FILE);
writeFileSync(file, `${JSON.stringify({ commit: commit() })}\n`);
