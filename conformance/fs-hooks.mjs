// Module resolve hook: only imports of "fs" made from inside the conformance
// package are redirected to fs-shim.mjs; everything else resolves normally.
const shimURL = new URL('./fs-shim.mjs', import.meta.url).href;
const suiteDir = '/node_modules/@modelcontextprotocol/conformance/';

export async function resolve(specifier, context, nextResolve) {
  const fromSuite = (context.parentURL ?? '').includes(suiteDir);
  if (fromSuite && (specifier === 'fs' || specifier === 'node:fs')) {
    return { url: shimURL, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
