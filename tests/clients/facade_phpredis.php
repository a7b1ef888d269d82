<?php
// Cluster facade: phpredis `RedisCluster` pointed at redcar's cluster-facade listener.
//
//     php facade_phpredis.php HOST PORT
//
// RedisCluster reads CLUSTER SLOTS from the seed, so it must see one primary (redcar itself, at
// PORT) owning every slot; then SET/GET on keys in many slots and an MGET across slots (which
// phpredis splits per slot itself) must work. Exits 1 at the first mismatch. Run by
// tests/it/facade.rs (`cargo test --test it facade`).

function fail(string $msg): void
{
    fwrite(STDERR, "facade_phpredis: FAIL: $msg\n");
    exit(1);
}

function eq(string $what, $got, $want): void
{
    if ($got !== $want) {
        fail("$what: expected " . var_export($want, true) . ", got " . var_export($got, true));
    }
}

/** Redis Cluster's key slot (CRC16/XMODEM of the hash tag or key, mod 16384). */
function key_slot(string $key): int
{
    $open = strpos($key, '{');
    if ($open !== false) {
        $close = strpos($key, '}', $open + 1);
        if ($close !== false && $close > $open + 1) {
            $key = substr($key, $open + 1, $close - $open - 1);
        }
    }
    $crc = 0;
    for ($i = 0; $i < strlen($key); $i++) {
        $crc ^= ord($key[$i]) << 8;
        for ($b = 0; $b < 8; $b++) {
            $crc = ($crc & 0x8000) ? (($crc << 1) ^ 0x1021) & 0xFFFF : ($crc << 1) & 0xFFFF;
        }
    }
    return $crc % 16384;
}

if (!class_exists('RedisCluster')) {
    fail("phpredis is not installed: run scripts/ensure-clients.sh (make test does)");
}
[$host, $port] = [$argv[1], (int) $argv[2]];

try {
    $rc = new RedisCluster(null, ["$host:$port"], 5.0, 10.0);
    eq("masters from CLUSTER SLOTS", $rc->_masters(), [[$host, $port]]);
    $p = "facade:phpredis:" . getmypid() . ":";
    $keys = [];
    for ($i = 0; $i < 20; $i++) {
        $keys[] = $p . $i;
    }
    $slots = [];
    foreach ($keys as $i => $key) {
        eq("SET $key", $rc->set($key, "v$i"), true);
        $slots[key_slot($key)] = true;
    }
    if (count($slots) < 10) {
        fail("the keys should span many slots, got " . count($slots));
    }
    foreach ($keys as $i => $key) {
        eq("GET $key", $rc->get($key), "v$i");
    }
    $want = [];
    foreach ($keys as $i => $key) {
        $want[] = "v$i";
    }
    eq("MGET across slots", $rc->mget($keys), $want);
    eq("DEL across slots", $rc->del($keys), count($keys));
    eq("GET after DEL", $rc->get($keys[0]), false);
    echo "ok: phpredis RedisCluster through the facade (" . count($slots) . " slots)\n";
} catch (Exception $e) {
    fail(get_class($e) . ": " . $e->getMessage());
}
