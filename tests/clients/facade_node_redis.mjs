#!/usr/bin/env node
// Cluster facade: node-redis (npm `redis`, v5) `createCluster` pointed at redcar's
// cluster-facade listener.
//
//     REDCAR_CLUSTER_NODE=HOST:PORT node facade_node_redis.mjs HOST PORT
//
// createCluster reads CLUSTER SLOTS at connect; it must find one primary (redcar, at PORT)
// owning every slot. Then SET/GET on keys in many slots (read back from the real cluster with
// `redis-cli -c`), MGET across slots (sent whole to the first key's node, redcar, which splits
// it) and MULTI on one hash tag, with node-redis's default (RESP2) and `RESP: 3`. Exits 1 at
// the first mismatch. Run by tests/it/facade.rs.
import { Checks, args, direct, helloFields, load, version } from "./node/lib.mjs";

const { createCluster } = load("redis");
const keySlot = load("cluster-key-slot");
const t = new Checks("facade_node_redis");
const where = args();

async function run(resp) {
  const options = { rootNodes: [{ socket: { host: where.host, port: where.port } }], defaults: { socket: { connectTimeout: 5000 } } };
  if (resp !== undefined) options.RESP = resp;
  const want = resp ?? 2;
  const rc = createCluster(options);
  rc.on("error", (e) => t.fail(`cluster error event: ${e.message}`));
  await rc.connect();

  const masters = rc.masters.map((n) => [n.host, n.port]);
  t.eq("nodes from CLUSTER SLOTS", masters, [[where.host, where.port]]);
  const hello = helloFields(await rc.sendCommand(undefined, true, ["HELLO"]));
  t.eq("HELLO proto and mode", [Number(hello.proto), String(hello.mode)], [want, "cluster"]);

  const p = `facade:noderedis:${process.pid}:${want}:`;
  const keys = Array.from({ length: 20 }, (_, i) => `${p}${i}`);
  const slots = new Set(keys.map((k) => keySlot(k)));
  t.ok("keys span many slots", slots.size >= 15, `(${slots.size})`);
  for (const [i, k] of keys.entries()) t.eq(`SET ${k}`, await rc.set(k, `v${i}`), "OK");
  for (const [i, k] of keys.entries()) t.eq(`GET ${k}`, await rc.get(k), `v${i}`);
  t.eq("direct GETs", direct(where, keys.map((k) => ["GET", k])), keys.map((_, i) => `v${i}`));
  t.eq("MGET across slots", await rc.mGet(keys), keys.map((_, i) => `v${i}`));
  const tag = `${p}{tx}`;
  t.eq("MULTI/EXEC", await rc.multi().set(`${tag}a`, "1").incr(`${tag}n`).exec(), ["OK", 1]);
  t.eq("direct after EXEC", direct(where, [["GET", `${tag}a`], ["GET", `${tag}n`]]), ["1", "1"]);
  for (const k of [...keys, `${tag}a`, `${tag}n`]) t.eq(`DEL ${k}`, await rc.del(k), 1);
  t.eq("direct EXISTS after DEL", direct(where, keys.map((k) => ["EXISTS", k])), keys.map(() => "0"));
  await rc.close();
  return `RESP${want}${resp === undefined ? " (default)" : ""}: ${slots.size} slots`;
}

try {
  const done = [await run(undefined), await run(3)];
  console.log(`facade_node_redis: ok: ${t.count} checks, redis ${version("redis")} createCluster; ${done.join("; ")}`);
  process.exit(0);
} catch (e) {
  t.fail(`${e.name}: ${e.message}\n${e.stack}`);
}
