/**
 * A section of a Markdown file that a script owns and rewrites, between `<!-- begin NAME -->` and
 * `<!-- end NAME -->` (NAME: the script's path). A writer that rewrites the whole file (bench/run.ts
 * writes BENCHMARKS.md) keeps such blocks with keepBlocks, so each script's figures survive the
 * other's run (test/scripts/generated-block.test.ts).
 */
const BLOCK = /<!-- begin (\S+) -->\n[\s\S]*?<!-- end \1 -->\n/g;

/** `text` with the block NAME replaced by `body`, or with it appended when the block is new. */
export function replaceBlock(text: string, name: string, body: string): string {
  const block = `<!-- begin ${name} -->\n${body.endsWith('\n') ? body : `${body}\n`}<!-- end ${name} -->\n`;
  let found = false;
  const out = text.replace(BLOCK, (whole, blockName: string) => {
    if (blockName !== name) return whole;
    found = true;
    return block;
  });
  if (found) return out;
  return `${text}${text === '' || text.endsWith('\n\n') ? '' : text.endsWith('\n') ? '\n' : '\n\n'}${block}`;
}

/** `next` with every block of `previous` that `next` lacks appended, in their order. */
export function keepBlocks(previous: string, next: string): string {
  let out = next;
  for (const m of previous.matchAll(BLOCK)) {
    const name = m[1]!;
    if (!out.includes(`<!-- begin ${name} -->`)) out = replaceBlock(out, name, m[0].split('\n').slice(1, -2).join('\n'));
  }
  return out;
}
