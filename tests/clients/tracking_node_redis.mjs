#!/usr/bin/env node
// Client-side caching through redcar with node-redis (npm `redis` v5): `createClient({ RESP: 3,
// clientSideCache })` against plain redcar.
//
//     REDCAR_CLUSTER_NODE=HOST:PORT node tracking_node_redis.mjs HOST PORT
//
// node-redis sends `CLIENT TRACKING ON` on its connection and keeps GET replies in a
// BasicClientSideCache that the invalidation pushes empty. Checks: repeated GETs are served from
// the cache (its hit count goes up, the nodes count no GET for them: INFO commandstats through
// redcar sums the primaries); a SET by another connection straight on the cluster (`redis-cli -c`
// on REDCAR_CLUSTER_NODE) reaches the cache as an invalidation of that key; the next GET returns
// the new value, read from the nodes. Run by tests/it/clients.rs; exits 1 at the first mismatch.
import { Checks, args, direct, load, until, version } from "./node/lib.mjs";

const { createClient, BasicClientSideCache } = load("redis");
const t = new Checks("tracking_node_redis");
const where = args();
const socket = { host: where.host, port: where.port, connectTimeout: 5000 };

// GET calls the primaries have counted (redcar sums INFO commandstats over them).
async function nodeGets(plain) {
  const m = /cmdstat_get:calls=(\d+)/.exec(await plain.info("commandstats"));
  return m ? Number(m[1]) : 0;
}

const cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0, evictPolicy: "LRU" });
const invalidated = [];
cache.on("invalidate", (key) => invalidated.push(key === null ? null : key.toString()));
const cached = createClient({ socket, RESP: 3, clientSideCache: cache });
const plain = createClient({ socket });
for (const c of [cached, plain]) c.on("error", (e) => t.fail(`client error event: ${e.message}`));
await cached.connect();
await plain.connect();

const key = `node:cc:${process.pid}`;
t.eq("SET straight on the cluster", direct(where, [["SET", key, "one"]]), ["OK"]);
t.eq("first GET (a miss, read from the nodes)", await cached.get(key), "one");
const base = cache.stats();
t.eq("first GET missed the cache", base.missCount, 1);

// Served from the cache: hits go up, the nodes see no GET.
const before = await nodeGets(plain);
for (let i = 0; i < 5; i++) t.eq(`cached GET ${i}`, await cached.get(key), "one");
t.eq("hits after 5 cached GETs", cache.stats().hitCount - base.hitCount, 5);
t.eq("GETs at the nodes while cached", await nodeGets(plain), before);

// Another connection, straight on the cluster, changes the key: the cache hears of it.
t.eq("SET by another connection straight on the cluster", direct(where, [["SET", key, "two"]]), ["OK"]);
await until(t, "invalidation push for the key", async () => invalidated.slice(), (v) => v.includes(key) || v.includes(null));
t.eq("GET after the invalidation", await cached.get(key), "two");
t.ok("the GET after the invalidation reached the nodes", (await nodeGets(plain)) > before);
t.eq("misses after the invalidation", cache.stats().missCount - base.missCount, 1);
// And that value is cached again.
const hits = cache.stats().hitCount;
t.eq("cached again", await cached.get(key), "two");
t.eq("a hit again", cache.stats().hitCount - hits, 1);

await cached.quit();
await plain.quit();
console.log(`tracking_node_redis: ok (node-redis ${version("redis")}, ${t.count} checks)`);
