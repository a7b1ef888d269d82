package redcar;

import static redcar.Check.eq;
import static redcar.Check.that;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.KeyValue;
import io.lettuce.core.LettuceFutures;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.TransactionResult;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisKeyAsyncCommands;
import io.lettuce.core.api.async.RedisStringAsyncCommands;
import io.lettuce.core.api.sync.BaseRedisCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.api.sync.RedisHashCommands;
import io.lettuce.core.api.sync.RedisKeyCommands;
import io.lettuce.core.api.sync.RedisStringCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.ArrayOutput;
import io.lettuce.core.protocol.CommandType;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;

/**
 * Lettuce 7: `RedisClient` (one multiplexed connection; a second one for pub/sub) and
 * `RedisClusterClient` against the facade. The sync and async APIs of the two share no common
 * type, so the workload takes the few command interfaces it uses.
 */
final class LettuceChecks {
    /** What Lettuce speaks when not told: HELLO 3 (RESP2 only if HELLO fails). */
    static final int DEFAULT_PROTO = 3;
    /** One event loop group for every client of the run: creating one per client costs time. */
    private static ClientResources resources;

    private LettuceChecks() {}

    static String version() {
        String v = RedisClient.class.getPackage().getImplementationVersion();
        return v == null ? "?" : v.split("/")[0];
    }

    private static ClientResources resources() {
        if (resources == null) {
            resources = DefaultClientResources.create();
        }
        return resources;
    }

    private static RedisURI uri(String host, int port) {
        return RedisURI.builder().withHost(host).withPort(port).withTimeout(Duration.ofSeconds(10)).build();
    }

    private static SocketOptions socket() {
        return SocketOptions.builder().connectTimeout(Duration.ofSeconds(5)).build();
    }

    private static ProtocolVersion version(Main.Proto proto) {
        return proto == Main.Proto.RESP2 ? ProtocolVersion.RESP2 : ProtocolVersion.RESP3;
    }

    private static int wanted(Main.Proto proto) {
        return proto == Main.Proto.RESP2 ? 2 : proto == Main.Proto.RESP3 ? 3 : DEFAULT_PROTO;
    }

    private static List<Object> hello(BaseRedisCommands<String, String> c) {
        return c.dispatch(CommandType.HELLO, new ArrayOutput<>(StringCodec.UTF8));
    }

    static String plain(String host, int port, Main.Proto proto, Direct direct) {
        RedisClient client = RedisClient.create(resources(), uri(host, port));
        var options = ClientOptions.builder().socketOptions(socket())
                .timeoutOptions(TimeoutOptions.enabled(Duration.ofSeconds(10)));
        if (proto != Main.Proto.DEFAULT) {
            options.protocolVersion(version(proto));
        }
        client.setOptions(options.build());
        try (StatefulRedisConnection<String, String> c = client.connect();
                StatefulRedisPubSubConnection<String, String> ps = client.connectPubSub()) {
            RedisCommands<String, String> r = c.sync();
            List<Object> hello = hello(r);
            eq("HELLO proto", Check.field(hello, "proto"), String.valueOf(wanted(proto)));
            eq("HELLO mode", Check.field(hello, "mode"), "standalone");
            return workload(r, c, c.async(), r, ps, "smoke:lettuce:" + proto.name() + ":", direct);
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }

    static String cluster(String host, int port, Main.Proto proto, Direct direct) {
        RedisClusterClient client = RedisClusterClient.create(resources(), uri(host, port));
        var options = ClusterClientOptions.builder().socketOptions(socket())
                .timeoutOptions(TimeoutOptions.enabled(Duration.ofSeconds(10)));
        if (proto != Main.Proto.DEFAULT) {
            options.protocolVersion(version(proto));
        }
        client.setOptions(options.build());
        try (StatefulRedisClusterConnection<String, String> c = client.connect();
                StatefulRedisPubSubConnection<String, String> ps = client.connectPubSub()) {
            List<String> nodes = new ArrayList<>();
            for (RedisClusterNode n : client.getPartitions()) {
                nodes.add(n.getUri().getHost() + ":" + n.getUri().getPort() + " " + n.getSlots().size() + " slots");
            }
            eq("nodes from CLUSTER NODES", nodes, List.of(host + ":" + port + " 16384 slots"));
            var r = c.sync();
            List<Object> hello = hello(r);
            eq("HELLO proto", Check.field(hello, "proto"), String.valueOf(wanted(proto)));
            eq("HELLO mode", Check.field(hello, "mode"), "cluster");
            // Lettuce runs MULTI only on a node's own connection, never on the cluster connection.
            RedisCommands<String, String> node = c.getConnection(host, port).sync();
            return workload(r, c, c.async(), node, ps, "facade:lettuce:" + proto.name() + ":", direct);
        } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }

    /** The checks every client runs: `r` for commands, `tx` for MULTI, `ps` for pub/sub. */
    static <S extends RedisStringCommands<String, String> & RedisKeyCommands<String, String>
            & RedisHashCommands<String, String> & BaseRedisCommands<String, String>,
            A extends RedisStringAsyncCommands<String, String> & RedisKeyAsyncCommands<String, String>>
            String workload(S r, StatefulConnection<String, String> conn, A async, RedisCommands<String, String> tx,
                    StatefulRedisPubSubConnection<String, String> ps, String prefix, Direct direct) {
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
        List<String> mget = new ArrayList<>();
        for (KeyValue<String, String> kv : r.mget(mgetKeys.toArray(String[]::new))) {
            mget.add(kv.getValueOrElse(null));
        }
        List<String> want = new ArrayList<>(Check.values(keys.size(), ""));
        want.add(null);
        eq("MGET across slots", mget, want);

        // A pipeline: with auto-flush off, every command is written before any reply is read.
        conn.setAutoFlushCommands(false);
        List<RedisFuture<?>> futures = new ArrayList<>();
        List<String> counters = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            futures.add(i % 2 == 1 ? async.get(keys.get(i)) : async.incr(keys.get(i) + ":n"));
            if (i % 2 == 0) {
                counters.add(keys.get(i) + ":n");
            }
        }
        conn.flushCommands();
        conn.setAutoFlushCommands(true);
        that("pipeline answered within 10 s",
                LettuceFutures.awaitAll(Duration.ofSeconds(10), futures.toArray(RedisFuture[]::new)), futures);
        for (int i = 0; i < keys.size(); i++) {
            eq("pipelined reply " + i, futures.get(i).toCompletableFuture().join(),
                    i % 2 == 1 ? (Object) ("v" + i) : (Object) 1L);
        }
        eq("direct INCR results", direct.get(counters), Collections.nCopies(counters.size(), "1"));

        String tag = p + "{tx}";
        eq("MULTI", tx.multi(), "OK");
        tx.set(tag + "a", "1");
        tx.incrby(tag + "n", 5);
        tx.get(tag + "a");
        tx.hset(tag + "h", Map.of("f", "x", "g", "y"));
        TransactionResult exec = tx.exec();
        that("EXEC not discarded", !exec.wasDiscarded(), exec);
        eq("EXEC replies", exec.stream().toList(), Arrays.asList("OK", 5L, "1", 2L));
        eq("direct after EXEC", List.of(direct.get(tag + "a"), direct.get(tag + "n"), direct.hget(tag + "h", "g")),
                List.of("1", "5", "y"));

        pubsub(r, ps, p);

        // Expiry: SET EX leaves a TTL on the cluster; SET PX really expires the key there.
        eq("SET EX", r.set(p + "ex", "x", SetArgs.Builder.ex(100)), "OK");
        long ttl = r.ttl(p + "ex");
        that("TTL in (0, 100]", ttl > 0 && ttl <= 100, ttl);
        long pttl = direct.pttl(p + "ex");
        that("direct PTTL in (0, 100000]", pttl > 0 && pttl <= 100_000, pttl);
        eq("SET PX", r.set(p + "px", "y", SetArgs.Builder.px(300)), "OK");
        long px = r.pttl(p + "px");
        that("PTTL in (0, 300]", px > 0 && px <= 300, px);
        long deadline = System.currentTimeMillis() + 5000;
        while (r.exists(p + "px") != 0) {
            that("the PX key expires within 5 s", System.currentTimeMillis() < deadline, px);
            Check.sleep(20);
        }
        eq("direct EXISTS after expiry", direct.exists(p + "px"), false);

        String s = p + "str";
        eq("SET a string", r.set(s, "abc"), "OK");
        Check.fails("INCR of a string", "ERR value is not an integer", () -> r.incr(s));
        eq("GET after an error", r.get(s), "abc");

        List<String> cleanup = new ArrayList<>(keys);
        cleanup.addAll(counters);
        cleanup.addAll(List.of(tag + "a", tag + "n", tag + "h", p + "ex", s));
        eq("DEL across slots", r.del(cleanup.toArray(String[]::new)), (long) cleanup.size());
        for (String k : List.of(keys.get(0), keys.get(39), tag + "h", p + "ex")) {
            eq("direct EXISTS after DEL " + k, direct.exists(k), false);
        }
        return keys.size() + " keys";
    }

    /** SUBSCRIBE and PSUBSCRIBE on the pub/sub connection, PUBLISH on the command one. */
    static void pubsub(BaseRedisCommands<String, String> r, StatefulRedisPubSubConnection<String, String> ps, String p) {
        String ch = p + "chan";
        BlockingQueue<String> got = new LinkedBlockingQueue<>();
        var listener = new RedisPubSubAdapter<String, String>() {
            @Override
            public void message(String channel, String message) {
                got.add("|" + channel + "|" + message);
            }

            @Override
            public void message(String pattern, String channel, String message) {
                got.add(pattern + "|" + channel + "|" + message);
            }
        };
        ps.addListener(listener);
        ps.sync().subscribe(ch);
        ps.sync().psubscribe(p + "ch*");
        eq("PUBSUB NUMSUB", r.pubsubNumsub(ch), Map.of(ch, 1L));
        long receivers = r.publish(ch, "hello");
        // As in Redis Cluster: the subscribers on the node the PUBLISH reached (0 or both).
        that("PUBLISH receivers", receivers == 0 || receivers == 2, receivers);
        eq("messages", new java.util.HashSet<>(List.of(poll(got), poll(got))), java.util.Set.of("|" + ch + "|hello", p + "ch*|" + ch + "|hello"));
        ps.sync().unsubscribe(ch);
        ps.sync().punsubscribe(p + "ch*");
        ps.removeListener(listener);
        long deadline = System.currentTimeMillis() + 5000;
        while (r.pubsubNumsub(ch).get(ch) != 0) {
            that("PUBSUB NUMSUB back to 0 within 5 s", System.currentTimeMillis() < deadline, "still subscribed");
            Check.sleep(20);
        }
    }

    private static String poll(BlockingQueue<String> q) {
        try {
            String s = q.poll(5, TimeUnit.SECONDS);
            that("a message within 5 s", s != null, s);
            return s;
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }
}
