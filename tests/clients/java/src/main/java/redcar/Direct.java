package redcar;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;

import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.RedisClusterClient;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * The real cluster, reached without redcar: a Jedis cluster client seeded with
 * REDCAR_CLUSTER_NODE, so what a check reads here is what the cluster's nodes hold.
 */
final class Direct implements AutoCloseable {
    private final RedisClusterClient cluster;
    /** Slot range start -> the port of the primary serving it (from CLUSTER SLOTS). */
    private final TreeMap<Long, Long> owners = new TreeMap<>();

    // Jedis 8 deprecates clusterSlots() for CLUSTER SHARDS; SLOTS is the simpler shape to read.
    @SuppressWarnings("deprecation")
    private Direct(HostAndPort node) {
        var config = DefaultJedisClientConfig.builder().resp2().timeoutMillis(5000).build();
        cluster = RedisClusterClient.builder().nodes(Set.of(node)).clientConfig(config).build();
        try (Jedis j = new Jedis(node, config)) {
            for (Object range : j.clusterSlots()) {
                List<?> r = (List<?>) range;
                owners.put((Long) r.get(0), (Long) ((List<?>) r.get(2)).get(1));
            }
        }
    }

    static Direct fromEnv() {
        String node = System.getenv("REDCAR_CLUSTER_NODE");
        if (node == null || !node.contains(":")) {
            throw new IllegalStateException(
                    "REDCAR_CLUSTER_NODE=HOST:PORT (a node of the real cluster) must be set, got " + node);
        }
        return new Direct(HostAndPort.from(node));
    }

    /** How many of the cluster's primaries own one of `keys`; a workload must reach them all. */
    void spansEveryPrimary(List<String> keys) {
        Set<Long> hit = new HashSet<>();
        Set<Integer> slots = new HashSet<>();
        for (String k : keys) {
            int slot = JedisClusterCRC16.getSlot(k);
            slots.add(slot);
            hit.add(owners.floorEntry((long) slot).getValue());
        }
        Check.eq("primaries owning the keys", hit, new HashSet<>(owners.values()));
        Check.that("keys in many slots", slots.size() >= keys.size() * 3 / 4, slots.size());
    }

    List<String> get(List<String> keys) {
        List<String> out = new ArrayList<>();
        keys.forEach(k -> out.add(cluster.get(k)));
        return out;
    }

    String get(String key) {
        return cluster.get(key);
    }

    String hget(String key, String field) {
        return cluster.hget(key, field);
    }

    long pttl(String key) {
        return cluster.pttl(key);
    }

    boolean exists(String key) {
        return cluster.exists(key);
    }

    @Override
    public void close() {
        cluster.close();
    }
}
