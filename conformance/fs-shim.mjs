// node:fs, plus a globSync for Node versions without one. The fallback only
// understands the pattern shape the suite uses, "**/<file name>": every file
// of that name below opts.cwd, as paths relative to it.
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

export function globSync(pattern, opts = {}) {
  if (typeof fs.globSync === 'function') {
    return fs.globSync(pattern, opts);
  }
  if (typeof pattern !== 'string' || !pattern.startsWith('**/') || pattern.slice(3).includes('/')) {
    throw new Error(`fs-shim: unsupported glob pattern ${JSON.stringify(pattern)}`);
  }
  const wanted = pattern.slice(3);
  const root = opts.cwd ? String(opts.cwd) : process.cwd();
  const found = [];
  const pending = [''];
  while (pending.length > 0) {
    const rel = pending.pop();
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const entryRel = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        pending.push(entryRel);
      } else if (entry.name === wanted) {
        found.push(entryRel);
      }
    }
  }
  return found.sort();
}
