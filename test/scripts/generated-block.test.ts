import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { keepBlocks, replaceBlock } from '../../scripts/generated-block.js';

describe('generated blocks of a Markdown file', () => {
  it('appends a new block, then replaces it in place', () => {
    const once = replaceBlock('# Benchmarks\n\ntable\n', 'scripts/x.ts', '## X\n\n1\n');
    assert.equal(once, '# Benchmarks\n\ntable\n\n<!-- begin scripts/x.ts -->\n## X\n\n1\n<!-- end scripts/x.ts -->\n');
    const twice = replaceBlock(`${once}\nafter\n`, 'scripts/x.ts', '## X\n\n2');
    assert.equal(twice, '# Benchmarks\n\ntable\n\n<!-- begin scripts/x.ts -->\n## X\n\n2\n<!-- end scripts/x.ts -->\n\nafter\n');
  });

  it('keeps the blocks of the previous file that a rewrite of the whole file lacks', () => {
    const previous = replaceBlock(replaceBlock('old tables\n', 'a.ts', 'A\n'), 'b.ts', 'B\n');
    const next = keepBlocks(previous, '# new tables\n');
    assert.equal(next, '# new tables\n\n<!-- begin a.ts -->\nA\n<!-- end a.ts -->\n\n<!-- begin b.ts -->\nB\n<!-- end b.ts -->\n');
    assert.equal(
      keepBlocks(previous, replaceBlock('# new\n', 'a.ts', 'A2\n'))
        .match(/A2|A\n/g)!
        .join(','),
      'A2',
    );
  });
});
