// Helpers shared by the Node.js client scripts (tests/clients/*.mjs): load a library from
// target/node (scripts/ensure-node-clients.sh), assert, and read keys back from the real
// cluster with `redis-cli -c` (REDCAR_CLUSTER_NODE=HOST:PORT, set by tests/it/clients.rs and
// tests/it/facade.rs), so a check never trusts the library or redcar alone.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { isDeepStrictEqual, inspect } from "node:util";

const modules =
  process.env.REDCAR_NODE_MODULES ||
  new URL("../../../target/node/node_modules/", import.meta.url).pathname;
const requireHere = createRequire(modules.endsWith("/") ? modules : modules + "/");

export function load(name) {
  try {
    return requireHere(requireHere.resolve(name, { paths: [modules] }));
  } catch (e) {
    console.error(`${name} is not installed under ${modules}: run scripts/ensure-node-clients.sh (make test does): ${e.message}`);
    process.exit(1);
  }
}

export function version(name) {
  return requireHere(requireHere.resolve(`${name}/package.json`, { paths: [modules] })).version;
}

export class Checks {
  constructor(script) {
    this.script = script;
    this.count = 0;
  }
  fail(msg) {
    console.error(`${this.script}: FAIL: ${msg}`);
    process.exit(1);
  }
  eq(what, got, want) {
    this.count += 1;
    if (!isDeepStrictEqual(got, want)) {
      this.fail(`${what}: expected ${inspect(want, { depth: 5 })}, got ${inspect(got, { depth: 5 })}`);
    }
  }
  ok(what, cond, detail = "") {
    this.count += 1;
    if (!cond) this.fail(`${what} ${detail}`);
  }
  // Expect `promise` to reject with an error whose message starts with `prefix`.
  async rejects(what, promise, prefix) {
    this.count += 1;
    try {
      const got = await promise;
      this.fail(`${what}: expected an error ${prefix}..., got ${inspect(got)}`);
    } catch (e) {
      if (!String(e.message).startsWith(prefix)) this.fail(`${what}: expected ${prefix}..., got ${e.message}`);
    }
  }
}

export function args() {
  if (process.argv.length !== 4) {
    console.error(`usage: ${process.argv[1]} HOST PORT`);
    process.exit(2);
  }
  const node = process.env.REDCAR_CLUSTER_NODE;
  if (!node) {
    console.error("REDCAR_CLUSTER_NODE=HOST:PORT (a node of the real cluster) must be set");
    process.exit(2);
  }
  const [nodeHost, nodePort] = node.split(":");
  return { host: process.argv[2], port: Number(process.argv[3]), nodeHost, nodePort };
}

// Run each command on the real cluster (`redis-cli -c`, one process, redirects followed) and
// return one reply line per command: raw strings, integers as digits, nil as "".
export function direct({ nodeHost, nodePort }, commands) {
  const input = commands.map((c) => c.map(quote).join(" ")).join("\n") + "\n";
  const out = execFileSync("redis-cli", ["-c", "-h", nodeHost, "-p", String(nodePort)], {
    input,
    encoding: "utf8",
    timeout: 20000,
  });
  // In cluster mode redis-cli reports each redirect it followed on a line of its own.
  const lines = out.split("\n").filter((l) => !l.startsWith("-> Redirected to slot"));
  lines.pop();
  if (lines.length !== commands.length) {
    throw new Error(`redis-cli: ${commands.length} commands, ${lines.length} reply lines: ${out}`);
  }
  return lines;
}

function quote(arg) {
  const s = String(arg);
  if (!/^[A-Za-z0-9:{}_.\-]+$/.test(s)) throw new Error(`direct(): unquotable argument ${s}`);
  return s;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Wait until `get()` resolves to something `done` accepts; returns it, or fails after `ms`.
export async function until(checks, what, get, done, ms = 5000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (done(v)) return v;
    if (Date.now() > deadline) checks.fail(`${what}: still ${inspect(v)} after ${ms} ms`);
    await sleep(20);
  }
}

// HELLO's reply as a plain object, whatever the protocol and the library's type mapping.
export function helloFields(reply) {
  if (reply instanceof Map) return Object.fromEntries(reply);
  if (Array.isArray(reply)) {
    const o = {};
    for (let i = 0; i + 1 < reply.length; i += 2) o[String(reply[i])] = reply[i + 1];
    return o;
  }
  return reply;
}
