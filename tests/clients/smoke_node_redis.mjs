#!/usr/bin/env node
// Smoke test: node-redis (npm `redis`, v5) against redcar as if it were one Redis server.
//
//     REDCAR_CLUSTER_NODE=HOST:PORT node smoke_node_redis.mjs HOST PORT
//
// A plain `createClient` (not createCluster): SET/GET over many slots, MGET and DEL across
// slots, an auto-pipelined burst, MULTI on one hash tag and a pipeline (`execAsPipeline`),
// pub/sub on a duplicate connection, expiry, and an error reply. Every write is read back
// from the real cluster with `redis-cli -c` (REDCAR_CLUSTER_NODE). Everything runs twice:
// with node-redis's default (RESP2: it sends no HELLO) and with `RESP: 3` (`HELLO 3`), and
// HELLO must report that protocol. Exits 1 at the first mismatch. Run by tests/it/clients.rs;
// the library comes from target/node (scripts/ensure-node-clients.sh).
import { Checks, args, direct, helloFields, load, sleep, until, version } from "./node/lib.mjs";

const { createClient } = load("redis");
const keySlot = load("cluster-key-slot");
const t = new Checks("smoke_node_redis");
const where = args();

async function run(resp) {
  const options = { socket: { host: where.host, port: where.port, connectTimeout: 5000 } };
  if (resp !== undefined) options.RESP = resp;
  const want = resp ?? 2;
  const r = createClient(options);
  r.on("error", (e) => t.fail(`client error event: ${e.message}`));
  await r.connect();

  t.eq("HELLO proto", Number(helloFields(await r.sendCommand(["HELLO"])).proto), want);
  t.eq("PING", await r.ping(), "PONG");
  const p = `smoke:noderedis:${process.pid}:${want}:`;

  // SET/GET over many slots; read back from the cluster itself.
  const keys = Array.from({ length: 40 }, (_, i) => `${p}k${i}`);
  const slots = new Set(keys.map((k) => keySlot(k)));
  t.ok("keys span many slots", slots.size >= 30, `(${slots.size})`);
  for (const [i, k] of keys.entries()) t.eq(`SET ${k}`, await r.set(k, `v${i}`), "OK");
  for (const [i, k] of keys.entries()) t.eq(`GET ${k}`, await r.get(k), `v${i}`);
  t.eq("direct GETs", direct(where, keys.map((k) => ["GET", k])), keys.map((_, i) => `v${i}`));
  t.eq("GET missing", await r.get(`${p}missing`), null);

  // MGET across slots (redcar splits and merges), then DEL across slots.
  t.eq("MGET across slots", await r.mGet([...keys, `${p}missing`]), [...keys.map((_, i) => `v${i}`), null]);
  // Auto-pipelining: commands issued in the same tick go out in one write.
  const burst = await Promise.all(keys.map((k, i) => (i % 2 ? r.get(k) : r.incr(`${k}:n`))));
  t.eq("auto-pipelined burst", burst, keys.map((_, i) => (i % 2 ? `v${i}` : 1)));
  t.eq("direct INCR results", direct(where, keys.filter((_, i) => i % 2 === 0).map((k) => ["GET", `${k}:n`])),
    keys.filter((_, i) => i % 2 === 0).map(() => "1"));
  t.eq("DEL across slots", await r.del([...keys.slice(0, 10), `${p}missing`]), 10);
  t.eq("direct EXISTS after DEL", direct(where, keys.slice(0, 12).map((k) => ["EXISTS", k])),
    keys.slice(0, 12).map((_, i) => (i < 10 ? "0" : "1")));

  // MULTI/EXEC on one hash tag, and a non-transactional pipeline over the same slot.
  const tag = `${p}{tx}`;
  const exec = await r.multi().set(`${tag}a`, "1").incrBy(`${tag}n`, 5).get(`${tag}a`).hSet(`${tag}h`, { f: "x", g: "y" }).exec();
  t.eq("MULTI/EXEC", exec, ["OK", 5, "1", 2]);
  t.eq("direct after EXEC", direct(where, [["GET", `${tag}a`], ["GET", `${tag}n`], ["HGET", `${tag}h`, "g"]]), ["1", "5", "y"]);
  const piped = await r.multi().incr(`${tag}n`).get(`${tag}n`).hGetAll(`${tag}h`).execAsPipeline();
  t.eq("pipeline", [piped[0], piped[1], { ...piped[2] }], [6, "6", { f: "x", g: "y" }]);
  // A command failing inside EXEC fails alone: node-redis raises MultiErrorReply with each reply.
  const failed = await r.multi().set(`${tag}s`, "x").lPush(`${tag}s`, "y").exec().then(
    (v) => t.fail(`MULTI with a WRONGTYPE command succeeded: ${v}`), (e) => e);
  t.eq("EXEC's replies", [failed.replies?.[0], failed.errorIndexes], ["OK", [1]]);
  t.ok("EXEC's WRONGTYPE", String(failed.replies?.[1]?.message).startsWith("WRONGTYPE"), String(failed.replies?.[1]));
  t.eq("direct after the failed command", direct(where, [["GET", `${tag}s`]]), ["x"]);

  // Pub/sub: subscribe on a duplicate connection, publish on the first one.
  const sub = r.duplicate();
  sub.on("error", (e) => t.fail(`subscriber error event: ${e.message}`));
  await sub.connect();
  const got = [];
  const chan = `${p}chan`;
  await sub.subscribe(chan, (message, channel) => got.push(["message", channel, message]));
  await sub.pSubscribe(`${p}ch*`, (message, channel) => got.push(["pmessage", channel, message]));
  await until(t, "PUBSUB NUMSUB", async () => (await r.pubSubNumSub(chan))[chan], (n) => n === 1);
  const receivers = await r.publish(chan, "hello");
  t.ok("PUBLISH receivers", receivers === 0 || receivers === 2, `(${receivers})`);
  await until(t, "messages received", async () => got.length, (n) => n >= 2);
  got.sort((a, b) => a[0].localeCompare(b[0]));
  t.eq("messages", got, [["message", chan, "hello"], ["pmessage", chan, "hello"]]);
  if (want === 3) {
    // RESP3 lets a subscribed connection run other commands; node-redis allows it.
    t.eq("GET on the subscribed connection", await sub.get(keys[11]), "v11");
  }
  await sub.unsubscribe(chan);
  await sub.pUnsubscribe(`${p}ch*`);
  t.eq("PUBSUB NUMSUB after UNSUBSCRIBE", (await r.pubSubNumSub(chan))[chan], 0);
  // node-redis 5 hands a RESP2 PING reply on a connection that was subscribed back as a Buffer
  // (from a plain redis-server too), hence String().
  t.eq("PING after unsubscribing", String(await sub.ping()), "PONG");
  sub.destroy();

  // Expiry: EX sets a TTL the cluster sees; PEXPIRE really expires the key.
  t.eq("SET EX", await r.set(`${p}ex`, "x", { EX: 100 }), "OK");
  const ttl = await r.ttl(`${p}ex`);
  t.ok("TTL in range", ttl > 0 && ttl <= 100, `(${ttl})`);
  const [pttl] = direct(where, [["PTTL", `${p}ex`]]);
  t.ok("direct PTTL in range", Number(pttl) > 0 && Number(pttl) <= 100000, `(${pttl})`);
  t.eq("PEXPIRE", await r.pExpire(`${p}ex`, 150), 1);
  await sleep(200);
  await until(t, "key expired", () => r.exists(`${p}ex`), (n) => n === 0, 3000);
  t.eq("direct EXISTS after expiry", direct(where, [["EXISTS", `${p}ex`]]), ["0"]);

  // An error reply is raised and the connection stays usable.
  await r.set(`${p}str`, "abc");
  await t.rejects("INCR of a string", r.incr(`${p}str`), "ERR value is not an integer");
  t.eq("GET after an error", await r.get(`${p}str`), "abc");

  t.eq("cleanup DEL", await r.del([...keys.slice(10), ...keys.filter((_, i) => i % 2 === 0).map((k) => `${k}:n`),
    `${tag}a`, `${tag}n`, `${tag}h`, `${tag}s`, `${p}str`]), 30 + 20 + 5);
  await r.quit();
  return `RESP${want}${resp === undefined ? " (default)" : ""}: ${slots.size} slots`;
}

try {
  const done = [await run(undefined), await run(3)];
  console.log(`smoke_node_redis: ok: ${t.count} checks, redis ${version("redis")}; ${done.join("; ")}`);
  process.exit(0);
} catch (e) {
  t.fail(`${e.name}: ${e.message}\n${e.stack}`);
}
