#!/usr/bin/env node
// Smoke test: ioredis (v6) against redcar as if it were one Redis server.
//
//     REDCAR_CLUSTER_NODE=HOST:PORT node smoke_ioredis.mjs HOST PORT
//
// A plain `new Redis()` (not Redis.Cluster): SET/GET over many slots, MGET and DEL across
// slots, a pipeline, MULTI on one hash tag, pub/sub on a duplicate connection, expiry, and an
// error reply. Every write is read back from the real cluster with `redis-cli -c`
// (REDCAR_CLUSTER_NODE). Everything runs twice: with ioredis 6's default (`protocol: 3`, which
// sends `HELLO 3` and silently falls back to RESP2 if HELLO fails, so the script checks what
// HELLO reports) and with `protocol: 2`. Exits 1 at the first mismatch. Run by
// tests/it/clients.rs; the library comes from target/node (scripts/ensure-node-clients.sh).
import { Checks, args, direct, helloFields, load, sleep, until, version } from "./node/lib.mjs";

const Redis = load("ioredis");
const keySlot = load("cluster-key-slot");
const t = new Checks("smoke_ioredis");
const where = args();

async function run(protocol) {
  const options = { host: where.host, port: where.port, connectTimeout: 5000, commandTimeout: 10000, maxRetriesPerRequest: 1 };
  if (protocol !== undefined) options.protocol = protocol;
  const want = protocol ?? 3;
  const r = new Redis(options);
  r.on("error", (e) => t.fail(`client error event: ${e.message}`));

  t.eq("HELLO proto", Number(helloFields(await r.call("HELLO")).proto), want);
  t.eq("PING", await r.ping(), "PONG");
  const p = `smoke:ioredis:${process.pid}:${want}:`;

  const keys = Array.from({ length: 40 }, (_, i) => `${p}k${i}`);
  const slots = new Set(keys.map((k) => keySlot(k)));
  t.ok("keys span many slots", slots.size >= 30, `(${slots.size})`);
  for (const [i, k] of keys.entries()) t.eq(`SET ${k}`, await r.set(k, `v${i}`), "OK");
  for (const [i, k] of keys.entries()) t.eq(`GET ${k}`, await r.get(k), `v${i}`);
  t.eq("direct GETs", direct(where, keys.map((k) => ["GET", k])), keys.map((_, i) => `v${i}`));
  t.eq("GET missing", await r.get(`${p}missing`), null);
  t.eq("MGET across slots", await r.mget(...keys, `${p}missing`), [...keys.map((_, i) => `v${i}`), null]);

  // A pipeline over keys on every node, answered in order.
  const pipe = r.pipeline();
  keys.forEach((k, i) => (i % 2 ? pipe.get(k) : pipe.incr(`${k}:n`)));
  t.eq("pipeline", await pipe.exec(), keys.map((_, i) => [null, i % 2 ? `v${i}` : 1]));
  t.eq("direct INCR results", direct(where, keys.filter((_, i) => i % 2 === 0).map((k) => ["GET", `${k}:n`])),
    keys.filter((_, i) => i % 2 === 0).map(() => "1"));
  t.eq("DEL across slots", await r.del(...keys.slice(0, 10), `${p}missing`), 10);
  t.eq("direct EXISTS after DEL", direct(where, keys.slice(0, 12).map((k) => ["EXISTS", k])),
    keys.slice(0, 12).map((_, i) => (i < 10 ? "0" : "1")));

  // MULTI/EXEC on one hash tag; a command failing inside EXEC fails alone.
  const tag = `${p}{tx}`;
  const exec = await r.multi().set(`${tag}a`, "1").incrby(`${tag}n`, 5).get(`${tag}a`).hset(`${tag}h`, { f: "x", g: "y" }).exec();
  t.eq("MULTI/EXEC", exec, [[null, "OK"], [null, 5], [null, "1"], [null, 2]]);
  t.eq("direct after EXEC", direct(where, [["GET", `${tag}a`], ["GET", `${tag}n`], ["HGET", `${tag}h`, "g"]]), ["1", "5", "y"]);
  const failed = await r.multi().set(`${tag}s`, "x").lpush(`${tag}s`, "y").exec();
  t.eq("EXEC with a failing command: first", failed[0], [null, "OK"]);
  t.ok("EXEC with a failing command: WRONGTYPE", String(failed[1][0]?.message).startsWith("WRONGTYPE"), String(failed[1]));
  t.eq("HGETALL", await r.hgetall(`${tag}h`), { f: "x", g: "y" });
  t.eq("ZSCORE", [await r.zadd(`${tag}z`, 2.5, "m"), await r.zscore(`${tag}z`, "m")], [1, "2.5"]);

  // Pub/sub: subscribe on a duplicate connection, publish on the first one.
  const sub = r.duplicate();
  sub.on("error", (e) => t.fail(`subscriber error event: ${e.message}`));
  const got = [];
  const chan = `${p}chan`;
  sub.on("message", (channel, message) => got.push(["message", channel, message]));
  sub.on("pmessage", (pattern, channel, message) => got.push(["pmessage", pattern, channel, message]));
  t.eq("SUBSCRIBE", await sub.subscribe(chan), 1);
  t.eq("PSUBSCRIBE", await sub.psubscribe(`${p}ch*`), 2);
  t.eq("PUBSUB NUMSUB", await r.pubsub("NUMSUB", chan), [chan, 1]);
  const receivers = await r.publish(chan, "hello");
  t.ok("PUBLISH receivers", receivers === 0 || receivers === 2, `(${receivers})`);
  await until(t, "messages received", async () => got.length, (n) => n >= 2);
  got.sort((a, b) => a[0].localeCompare(b[0]));
  t.eq("messages", got, [["message", chan, "hello"], ["pmessage", `${p}ch*`, chan, "hello"]]);
  await sub.unsubscribe(chan);
  await sub.punsubscribe(`${p}ch*`);
  t.eq("PUBSUB NUMSUB after UNSUBSCRIBE", await r.pubsub("NUMSUB", chan), [chan, 0]);
  t.eq("GET after unsubscribing", await sub.get(keys[11]), "v11");
  sub.disconnect();

  // Expiry: EX sets a TTL the cluster sees; PEXPIRE really expires the key.
  t.eq("SET EX", await r.set(`${p}ex`, "x", "EX", 100), "OK");
  const ttl = await r.ttl(`${p}ex`);
  t.ok("TTL in range", ttl > 0 && ttl <= 100, `(${ttl})`);
  const [pttl] = direct(where, [["PTTL", `${p}ex`]]);
  t.ok("direct PTTL in range", Number(pttl) > 0 && Number(pttl) <= 100000, `(${pttl})`);
  t.eq("PEXPIRE", await r.pexpire(`${p}ex`, 150), 1);
  await sleep(200);
  await until(t, "key expired", () => r.exists(`${p}ex`), (n) => n === 0, 3000);
  t.eq("direct EXISTS after expiry", direct(where, [["EXISTS", `${p}ex`]]), ["0"]);

  await r.set(`${p}str`, "abc");
  await t.rejects("INCR of a string", r.incr(`${p}str`), "ERR value is not an integer");
  t.eq("GET after an error", await r.get(`${p}str`), "abc");

  t.eq("cleanup DEL", await r.del(...keys.slice(10), ...keys.filter((_, i) => i % 2 === 0).map((k) => `${k}:n`),
    `${tag}a`, `${tag}n`, `${tag}h`, `${tag}s`, `${tag}z`, `${p}str`), 30 + 20 + 6);
  await r.quit();
  return `RESP${want}${protocol === undefined ? " (default)" : ""}: ${slots.size} slots`;
}

try {
  const done = [await run(undefined), await run(2)];
  console.log(`smoke_ioredis: ok: ${t.count} checks, ioredis ${version("ioredis")}; ${done.join("; ")}`);
  process.exit(0);
} catch (e) {
  t.fail(`${e.name}: ${e.message}\n${e.stack}`);
}
