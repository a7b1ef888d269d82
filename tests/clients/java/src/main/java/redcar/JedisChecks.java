package redcar;

import static redcar.Check.eq;
import static redcar.Check.that;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Function;

import redis.clients.jedis.AbstractTransaction;
import redis.clients.jedis.ConnectionPoolConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisClusterClient;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.params.SetParams;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Jedis 8: `RedisClient` (the pooled client that replaced `JedisPooled`) plus a `Jedis`
 * connection of its own for the subscriber, and `RedisClusterClient` (which replaced
 * `JedisCluster`) against the facade. Both are `UnifiedJedis`, so one workload serves both.
 */
final class JedisChecks {
    /** What Jedis 8 speaks when not told: HELLO 3. */
    static final int DEFAULT_PROTO = 3;

    private JedisChecks() {}

    static String version() {
        // Jedis's manifest has no Implementation-Version; its pom.properties has the version.
        var props = new java.util.Properties();
        try (var in = Jedis.class.getResourceAsStream("/META-INF/maven/redis.clients/jedis/pom.properties")) {
            props.load(in);
        } catch (java.io.IOException | NullPointerException e) {
            return "?";
        }
        return props.getProperty("version", "?");
    }

    static JedisClientConfig config(Main.Proto proto) {
        var b = DefaultJedisClientConfig.builder().connectionTimeoutMillis(5000).socketTimeoutMillis(10_000);
        switch (proto) {
            case RESP2 -> b.resp2();
            case RESP3 -> b.resp3();
            default -> { }
        }
        return b.build();
    }

    static int wanted(Main.Proto proto) {
        return proto == Main.Proto.RESP2 ? 2 : proto == Main.Proto.RESP3 ? 3 : DEFAULT_PROTO;
    }

    /** The pool behind a balancer: FIFO, so borrowing rotates over every connection (docs/clients.md). */
    static ConnectionPoolConfig pool() {
        ConnectionPoolConfig pool = new ConnectionPoolConfig();
        pool.setMaxTotal(4);
        pool.setLifo(false);
        return pool;
    }

    // HELLO and PUBSUB NUMSUB have no typed method on UnifiedJedis; Jedis 8 deprecates the raw
    // sendCommand() there, which still is the way to send them.
    @SuppressWarnings("deprecation")
    static String plain(String host, int port, Main.Proto proto, Direct direct) {
        HostAndPort addr = new HostAndPort(host, port);
        JedisClientConfig config = config(proto);
        try (RedisClient r = RedisClient.builder().hostAndPort(addr).clientConfig(config).poolConfig(pool()).build()) {
            Object hello = r.sendCommand(Protocol.Command.HELLO);
            eq("HELLO proto", Check.field(hello, "proto"), String.valueOf(wanted(proto)));
            eq("HELLO mode", Check.field(hello, "mode"), "standalone");
            // The subscriber gets a `Jedis` of its own, as an application would dedicate one.
            return workload(r, "smoke:jedis:" + proto.name() + ":", direct, tag -> r.multi(), (sub, ch) -> {
                try (Jedis j = new Jedis(addr, config)) {
                    j.subscribe(sub, ch);
                }
            });
        }
    }

    @SuppressWarnings("deprecation")
    static String cluster(String host, int port, Main.Proto proto, Direct direct) {
        try (RedisClusterClient rc = RedisClusterClient.builder()
                .nodes(Set.of(new HostAndPort(host, port))).clientConfig(config(proto)).poolConfig(pool())
                .maxAttempts(2).build()) {
            eq("nodes from CLUSTER SLOTS", rc.getClusterNodes().keySet(), Set.of(host + ":" + port));
            Object hello = rc.sendCommand("any", Protocol.Command.HELLO);
            eq("HELLO proto", Check.field(hello, "proto"), String.valueOf(wanted(proto)));
            eq("HELLO mode", Check.field(hello, "mode"), "cluster");
            // The cluster client refuses multi() and transaction() (UnsupportedOperationException):
            // a transaction runs on a connection to the node that owns its slot (here redcar).
            Function<String, AbstractTransaction> tx =
                    tag -> new Transaction(rc.getConnectionFromSlot(JedisClusterCRC16.getSlot(tag)), true, true);
            return workload(rc, "facade:jedis:" + proto.name() + ":", direct, tx, rc::subscribe);
        }
    }

    /**
     * The checks every client runs; `transaction` opens MULTI for a key's slot, `subscribe` blocks
     * in a subscription until it is left.
     */
    static String workload(UnifiedJedis r, String prefix, Direct direct, Function<String, AbstractTransaction> transaction,
            BiConsumer<JedisPubSub, String> subscribe) {
        String p = prefix + ProcessHandle.current().pid() + ":";
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            keys.add(p + "k" + i);
        }
        direct.spansEveryPrimary(keys);
        for (int i = 0; i < keys.size(); i++) {
            eq("SET " + keys.get(i), r.set(keys.get(i), "v" + i), "OK");
        }
        for (int i = 0; i < keys.size(); i++) {
            eq("GET " + keys.get(i), r.get(keys.get(i)), "v" + i);
        }
        eq("direct GETs", direct.get(keys), Check.values(keys.size(), ""));
        eq("GET missing", r.get(p + "missing"), null);

        List<String> mgetKeys = new ArrayList<>(keys);
        mgetKeys.add(p + "missing");
        List<String> want = new ArrayList<>(Check.values(keys.size(), ""));
        want.add(null);
        eq("MGET across slots", r.mget(mgetKeys.toArray(String[]::new)), want);

        // A pipeline over keys on every node, answered in order.
        var pipe = r.pipelined();
        List<Response<?>> replies = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            replies.add(i % 2 == 1 ? pipe.get(keys.get(i)) : pipe.incr(keys.get(i) + ":n"));
        }
        pipe.sync();
        List<String> counters = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            eq("pipelined reply " + i, replies.get(i).get(), i % 2 == 1 ? (Object) ("v" + i) : (Object) 1L);
            if (i % 2 == 0) {
                counters.add(keys.get(i) + ":n");
            }
        }
        eq("direct INCR results", direct.get(counters), java.util.Collections.nCopies(counters.size(), "1"));

        // MULTI/EXEC on one hash tag, checked on the node that owns it.
        String tag = p + "{tx}";
        List<Object> exec;
        try (AbstractTransaction tx = transaction.apply(tag)) {
            tx.set(tag + "a", "1");
            tx.incrBy(tag + "n", 5);
            tx.get(tag + "a");
            tx.hset(tag + "h", java.util.Map.of("f", "x", "g", "y"));
            exec = tx.exec();
        }
        eq("EXEC replies", exec, Arrays.asList("OK", 5L, "1", 2L));
        eq("direct after EXEC", List.of(direct.get(tag + "a"), direct.get(tag + "n"), direct.hget(tag + "h", "g")),
                List.of("1", "5", "y"));

        pubsub(r, p, subscribe);
        expiry(r, p, direct);

        eq("SET a string", r.set(p + "str", "abc"), "OK");
        Check.fails("INCR of a string", "ERR value is not an integer", () -> r.incr(p + "str"));
        eq("GET after an error", r.get(p + "str"), "abc");

        List<String> cleanup = new ArrayList<>(keys);
        cleanup.addAll(counters);
        cleanup.addAll(List.of(tag + "a", tag + "n", tag + "h", p + "str"));
        eq("DEL across slots", r.del(cleanup.toArray(String[]::new)), (long) cleanup.size());
        for (String k : List.of(keys.get(0), keys.get(39), tag + "h")) {
            eq("direct EXISTS after DEL " + k, direct.exists(k), false);
        }
        return keys.size() + " keys";
    }

    /** SUBSCRIBE and PSUBSCRIBE on one connection, PUBLISH on another, both messages arrive. */
    @SuppressWarnings("deprecation")
    static void pubsub(UnifiedJedis r, String p, BiConsumer<JedisPubSub, String> subscribe) {
        String ch = p + "chan";
        BlockingQueue<String> got = new LinkedBlockingQueue<>();
        JedisPubSub sub = new JedisPubSub() {
            @Override
            public void onMessage(String channel, String message) {
                got.add("|" + channel + "|" + message);
            }

            @Override
            public void onPMessage(String pattern, String channel, String message) {
                got.add(pattern + "|" + channel + "|" + message);
            }

            @Override
            public void onSubscribe(String channel, int n) {
                got.add("subscribe " + channel);
            }

            @Override
            public void onPSubscribe(String pattern, int n) {
                got.add("psubscribe " + pattern);
            }
        };
        List<Throwable> failure = new ArrayList<>();
        Thread t = new Thread(() -> {
            try {
                subscribe.accept(sub, ch);
            } catch (Throwable e) {
                failure.add(e);
                got.add("error " + e);
            }
        }, "jedis-subscriber");
        t.start();
        eq("subscribed", poll(got), "subscribe " + ch);
        sub.psubscribe(p + "ch*");
        eq("psubscribed", poll(got), "psubscribe " + p + "ch*");
        Object numsub = r.sendCommand(ch, Protocol.Command.PUBSUB, "NUMSUB", ch);
        eq("PUBSUB NUMSUB", Check.field(numsub, ch), "1");
        long receivers = r.publish(ch, "hello");
        // As in Redis Cluster: the subscribers on the node the PUBLISH reached (0 or both).
        that("PUBLISH receivers", receivers == 0 || receivers == 2, receivers);
        eq("messages", new java.util.HashSet<>(List.of(poll(got), poll(got))), java.util.Set.of("|" + ch + "|hello", p + "ch*|" + ch + "|hello"));
        sub.unsubscribe();
        sub.punsubscribe();
        try {
            t.join(5000);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
        that("subscriber returned after UNSUBSCRIBE", !t.isAlive() && failure.isEmpty(), failure);
        long deadline = System.currentTimeMillis() + 5000;
        while (!Check.field(r.sendCommand(ch, Protocol.Command.PUBSUB, "NUMSUB", ch), ch).equals("0")) {
            that("PUBSUB NUMSUB back to 0 within 5 s", System.currentTimeMillis() < deadline, "still subscribed");
            Check.sleep(20);
        }
    }

    private static String poll(BlockingQueue<String> q) {
        try {
            String s = q.poll(5, TimeUnit.SECONDS);
            that("a pub/sub event within 5 s", s != null, s);
            return s;
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    /** SET EX: the TTL is on the cluster; SET PX: the key really expires there. */
    static void expiry(UnifiedJedis r, String p, Direct direct) {
        eq("SET EX", r.set(p + "ex", "x", SetParams.setParams().ex(100)), "OK");
        long ttl = r.ttl(p + "ex");
        that("TTL in (0, 100]", ttl > 0 && ttl <= 100, ttl);
        long pttl = direct.pttl(p + "ex");
        that("direct PTTL in (0, 100000]", pttl > 0 && pttl <= 100_000, pttl);
        eq("SET PX", r.set(p + "px", "y", SetParams.setParams().px(300)), "OK");
        long px = r.pttl(p + "px");
        that("PTTL in (0, 300]", px > 0 && px <= 300, px);
        long deadline = System.currentTimeMillis() + 5000;
        while (r.exists(p + "px")) {
            that("the PX key expires within 5 s", System.currentTimeMillis() < deadline, px);
            Check.sleep(20);
        }
        eq("direct EXISTS after expiry", direct.exists(p + "px"), false);
        eq("DEL the EX key", r.del(p + "ex"), 1L);
    }
}
