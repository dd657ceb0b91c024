#!/usr/bin/env node
import { processIO } from './args.js';
import { runCli } from './program.js';

runCli(process.argv.slice(2), processIO).then((code) => {
  process.exitCode = code;
});
