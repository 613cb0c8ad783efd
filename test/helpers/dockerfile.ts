// Reads the repository's Dockerfile into what the tests check without a
// Docker engine: each stage's instructions, its ENV and VOLUME lines. A
// parser of the subset the Dockerfile uses (line continuations, comments,
// KEY=VALUE env pairs, JSON or plain arguments); anything else is an error,
// so the tests cannot silently skip an instruction.

import fs from 'node:fs';
import path from 'node:path';
import { REPO } from './ingester.js';

export interface Instruction {
  readonly op: string;
  readonly args: string;
}

export interface Stage {
  readonly name: string | undefined;
  readonly from: string;
  readonly instructions: Instruction[];
}

export const DOCKERFILE = path.join(REPO, 'Dockerfile');

const KNOWN = new Set(['FROM', 'WORKDIR', 'COPY', 'RUN', 'ENV', 'USER', 'VOLUME', 'EXPOSE', 'STOPSIGNAL', 'ENTRYPOINT', 'CMD', 'ARG', 'LABEL']);

export function parseDockerfile(text = fs.readFileSync(DOCKERFILE, 'utf8')): Stage[] {
  const logical: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    if (/^\s*#/.test(raw) && cur === '') continue;
    if (/^\s*#/.test(raw)) continue; // a comment inside a continued instruction
    if (raw.endsWith('\\')) {
      cur += raw.slice(0, -1) + ' ';
      continue;
    }
    cur += raw;
    if (cur.trim() !== '') logical.push(cur.trim());
    cur = '';
  }
  const stages: Stage[] = [];
  for (const line of logical) {
    const m = /^([A-Za-z]+)\s+([\s\S]*)$/.exec(line);
    if (m === null) throw new Error(`Dockerfile: cannot parse ${JSON.stringify(line)}`);
    const op = m[1]!.toUpperCase();
    if (!KNOWN.has(op)) throw new Error(`Dockerfile: instruction ${op} is not understood by test/helpers/dockerfile.ts`);
    const args = m[2]!.replace(/\s+/g, ' ').trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?: AS (\S+))?$/i.exec(args);
      if (f === null) throw new Error(`Dockerfile: cannot parse FROM ${args}`);
      stages.push({ from: f[1]!, name: f[2], instructions: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`Dockerfile: ${op} before FROM`);
    stages.at(-1)!.instructions.push({ op, args });
  }
  return stages;
}

/** The final stage's environment (ENV KEY=VALUE pairs, in order). */
export function imageEnv(stages = parseDockerfile()): Record<string, string> {
  const env: Record<string, string> = {};
  for (const ins of stages.at(-1)!.instructions) {
    if (ins.op !== 'ENV') continue;
    for (const pair of ins.args.split(' ')) {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new Error(`Dockerfile: ENV ${ins.args}: only KEY=VALUE pairs are supported`);
      env[pair.slice(0, eq)] = pair.slice(eq + 1).replace(/^"(.*)"$/, '$1');
    }
  }
  return env;
}

/** The final stage's VOLUME paths. */
export function imageVolumes(stages = parseDockerfile()): string[] {
  const out: string[] = [];
  for (const ins of stages.at(-1)!.instructions) {
    if (ins.op !== 'VOLUME') continue;
    out.push(...(ins.args.startsWith('[') ? (JSON.parse(ins.args) as string[]) : ins.args.split(' ')));
  }
  return out;
}

/** A JSON-array argument (ENTRYPOINT, CMD). */
export function execForm(stage: Stage, op: string): string[] {
  const ins = stage.instructions.filter((i) => i.op === op).at(-1);
  if (ins === undefined) return [];
  return JSON.parse(ins.args) as string[];
}
