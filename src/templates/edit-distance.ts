/** Levenshtein distance of `a` and `b` when it is at most `max`, else `max + 1` (found without finishing the table). */
export function editDistance(a: string, b: string, max: number): number {
  const over = max + 1;
  if (Math.abs(a.length - b.length) > max) return over;
  // Only the band of cells within `max` of the diagonal can hold a distance of `max` or less.
  let previous: number[] = [];
  let row: number[] = [];
  for (let j = 0; j <= b.length; j++) previous.push(j <= max ? j : over);
  for (let i = 1; i <= a.length; i++) {
    const from = Math.max(1, i - max);
    const to = Math.min(b.length, i + max);
    row[from - 1] = from === 1 && i <= max ? i : over;
    let least = row[from - 1]!;
    for (let j = from; j <= to; j++) {
      const cost = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1), over);
      row[j] = cost;
      if (cost < least) least = cost;
    }
    if (to < b.length) row[to + 1] = over;
    if (least > max) return over;
    [previous, row] = [row, previous];
  }
  return Math.min(previous[b.length]!, over);
}
