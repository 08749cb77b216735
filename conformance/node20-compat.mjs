// Loaded with `node --import ./node20-compat.mjs` (run.sh sets NODE_OPTIONS).
// The conformance suite imports globSync from "fs", which Node 20 lacks; the
// hooks below hand the suite a copy of "fs" that has one.
import { register } from 'node:module';

register('./fs-hooks.mjs', import.meta.url);
