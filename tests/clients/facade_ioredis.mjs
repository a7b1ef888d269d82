#!/usr/bin/env node
// Cluster facade: ioredis `Redis.Cluster` pointed at redcar's cluster-facade listener.
//
//     REDCAR_CLUSTER_NODE=HOST:PORT node facade_ioredis.mjs HOST PORT
//
// Redis.Cluster reads CLUSTER SLOTS at start-up; it must find one primary (redcar, at PORT)
// owning every slot. Then SET/GET on keys in many slots (read back from the real cluster with
// `redis-cli -c`), MGET across slots (ioredis sends it whole to the slot's node, redcar, which
// splits it), a pipeline over many slots (ioredis allows one when all its slots are on one node),
// MULTI on one hash tag. Runs with ioredis 6's default (`protocol: 3`) and `protocol: 2`.
// Exits 1 at the first mismatch. Run by tests/it/facade.rs.
import { Checks, args, direct, helloFields, load, version } from "./node/lib.mjs";

const Redis = load("ioredis");
const keySlot = load("cluster-key-slot");
const t = new Checks("facade_ioredis");
const where = args();

async function run(protocol) {
  const redisOptions = { connectTimeout: 5000, commandTimeout: 10000 };
  if (protocol !== undefined) redisOptions.protocol = protocol;
  const want = protocol ?? 3;
  const rc = new Redis.Cluster([{ host: where.host, port: where.port }], { redisOptions, enableReadyCheck: true });
  rc.on("error", (e) => t.fail(`cluster error event: ${e.message}`));
  await new Promise((resolve, reject) => { rc.once("ready", resolve); rc.once("end", () => reject(new Error("cluster ended"))); });

  const masters = rc.nodes("master").map((n) => [n.options.host, n.options.port]);
  t.eq("nodes from CLUSTER SLOTS", masters, [[where.host, where.port]]);
  t.eq("HELLO proto", Number(helloFields(await rc.call("HELLO")).proto), want);
  t.ok("HELLO mode", helloFields(await rc.call("HELLO")).mode === "cluster");

  const p = `facade:ioredis:${process.pid}:${want}:`;
  const keys = Array.from({ length: 20 }, (_, i) => `${p}${i}`);
  const slots = new Set(keys.map((k) => keySlot(k)));
  t.ok("keys span many slots", slots.size >= 15, `(${slots.size})`);
  for (const [i, k] of keys.entries()) t.eq(`SET ${k}`, await rc.set(k, `v${i}`), "OK");
  for (const [i, k] of keys.entries()) t.eq(`GET ${k}`, await rc.get(k), `v${i}`);
  t.eq("direct GETs", direct(where, keys.map((k) => ["GET", k])), keys.map((_, i) => `v${i}`));
  t.eq("MGET across slots", await rc.mget(...keys), keys.map((_, i) => `v${i}`));
  const pipe = rc.pipeline();
  keys.forEach((k) => pipe.append(k, "+"));
  t.eq("pipeline across slots", await pipe.exec(), keys.map((_, i) => [null, `v${i}+`.length]));
  t.eq("direct after the pipeline", direct(where, keys.map((k) => ["GET", k])), keys.map((_, i) => `v${i}+`));
  const tag = `${p}{tx}`;
  t.eq("MULTI/EXEC", await rc.multi().set(`${tag}a`, "1").incr(`${tag}n`).exec(), [[null, "OK"], [null, 1]]);
  t.eq("direct after EXEC", direct(where, [["GET", `${tag}a`], ["GET", `${tag}n`]]), ["1", "1"]);
  t.eq("DEL across slots", await rc.del(...keys), keys.length);
  t.eq("cleanup", await rc.del(`${tag}a`, `${tag}n`), 2);
  t.eq("direct EXISTS after DEL", direct(where, keys.map((k) => ["EXISTS", k])), keys.map(() => "0"));
  await rc.quit();
  return `RESP${want}${protocol === undefined ? " (default)" : ""}: ${slots.size} slots`;
}

try {
  const done = [await run(undefined), await run(2)];
  console.log(`facade_ioredis: ok: ${t.count} checks, ioredis ${version("ioredis")} Redis.Cluster; ${done.join("; ")}`);
  process.exit(0);
} catch (e) {
  t.fail(`${e.name}: ${e.message}\n${e.stack}`);
}
