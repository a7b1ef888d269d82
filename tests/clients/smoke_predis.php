<?php
// Smoke test: predis (`Predis\Client`, no cluster option) against redcar as if it were one node.
//
//     php smoke_predis.php HOST PORT
//
// Exercises every data type, a pipeline, EVAL, SCAN and an error reply; exits 1 with a message
// at the first mismatch. Run by tests/it/clients.rs (`cargo test --test it clients`); needs
// php-cli and php-predis, which installs /usr/share/php/Predis (scripts/ensure-clients.sh).

$checks = 0;

function fail(string $msg): void
{
    fwrite(STDERR, "smoke_predis: FAIL: $msg\n");
    exit(1);
}

function eq(string $what, $got, $want): void
{
    global $checks;
    $checks++;
    if ($got !== $want) {
        fail("$what: expected " . var_export($want, true) . ", got " . var_export($got, true));
    }
}

/** Status replies (+OK) are Predis\Response\Status objects; compare them as strings. */
function st($reply)
{
    return $reply instanceof Predis\Response\Status ? (string) $reply : $reply;
}

if (!(@include_once 'Predis/autoload.php') || !class_exists('Predis\Client')) {
    fail("predis is not installed: run scripts/ensure-clients.sh (make test does), "
        . "or apt-get install php-cli php-predis");
}
if ($argc !== 3) {
    fwrite(STDERR, "usage: php smoke_predis.php HOST PORT\n");
    exit(2);
}
[$host, $port] = [$argv[1], (int) $argv[2]];

try {
    $r = new Predis\Client([
        'scheme' => 'tcp',
        'host' => $host,
        'port' => $port,
        'timeout' => 5.0,
        'read_write_timeout' => 10,
    ]);
    $r->connect();

    $p = "smoke:predis:" . getmypid() . ":";
    $written = [];
    $k = function (string $name) use ($p, &$written): string {
        $written[$p . $name] = true;
        return $p . $name;
    };

    eq("PING", st($r->ping()), "PONG");
    eq("ECHO", $r->echo("hello"), "hello");

    // strings
    eq("SET", st($r->set($k("str"), "value")), "OK");
    eq("GET", $r->get($p . "str"), "value");
    eq("GET missing", $r->get($p . "missing"), null);
    eq("INCR", $r->incr($k("counter")), 1);
    eq("INCRBY", $r->incrby($p . "counter", 41), 42);
    eq("SET EX", st($r->set($k("ex"), "x", "EX", 100)), "OK");

    // MSET/MGET over keys in different slots: redcar splits and merges them
    $many = [];
    for ($i = 0; $i < 20; $i++) {
        $many[$k("m$i")] = "v$i";
    }
    eq("MSET", st($r->mset($many)), "OK");
    $names = array_merge(array_keys($many), [$p . "missing"]);
    eq("MGET", $r->mget($names), array_merge(array_values($many), [null]));

    // DEL of several keys across slots
    $gone = [];
    for ($i = 0; $i < 5; $i++) {
        $gone[] = $p . "m$i";
        unset($written[$p . "m$i"]);
    }
    eq("DEL", $r->del(array_merge($gone, [$p . "missing"])), 5);
    eq("EXISTS", $r->exists(...array_merge($gone, [$p . "m5", $p . "m6"])), 2);

    // hash
    eq("HMSET", st($r->hmset($k("hash"), ["a" => "1", "b" => "2", "c" => "3"])), "OK");
    eq("HSET", $r->hset($p . "hash", "d", "4"), 1);
    eq("HGET", $r->hget($p . "hash", "b"), "2");
    eq("HGETALL", $r->hgetall($p . "hash"), ["a" => "1", "b" => "2", "c" => "3", "d" => "4"]);
    eq("HINCRBY", $r->hincrby($p . "hash", "a", 9), 10);
    eq("HDEL", $r->hdel($p . "hash", ["c", "d"]), 2);
    eq("HLEN", $r->hlen($p . "hash"), 2);

    // list
    eq("RPUSH", $r->rpush($k("list"), ["a", "b", "c"]), 3);
    eq("LPUSH", $r->lpush($p . "list", ["z"]), 4);
    eq("LRANGE", $r->lrange($p . "list", 0, -1), ["z", "a", "b", "c"]);
    eq("LPOP", $r->lpop($p . "list"), "z");
    eq("RPOP", $r->rpop($p . "list"), "c");
    eq("LLEN", $r->llen($p . "list"), 2);

    // set
    eq("SADD", $r->sadd($k("set"), ["x", "y", "z", "x"]), 3);
    $members = $r->smembers($p . "set");
    sort($members);
    eq("SMEMBERS", $members, ["x", "y", "z"]);
    eq("SISMEMBER", $r->sismember($p . "set", "y"), 1);
    eq("SREM", $r->srem($p . "set", "y"), 1);
    eq("SCARD", $r->scard($p . "set"), 2);

    // sorted set
    eq("ZADD", $r->zadd($k("zset"), ["a" => 1, "b" => 2.5, "c" => 3]), 3);
    eq("ZRANGE WITHSCORES", $r->zrange($p . "zset", 0, -1, ["withscores" => true]),
        ["a" => "1", "b" => "2.5", "c" => "3"]);
    eq("ZSCORE", $r->zscore($p . "zset", "b"), "2.5");
    eq("ZINCRBY", $r->zincrby($p . "zset", 10, "a"), "11");
    eq("ZRANK", $r->zrank($p . "zset", "a"), 2);
    eq("ZRANGEBYSCORE", $r->zrangebyscore($p . "zset", 2, 5), ["b", "c"]);

    // expiry
    $ttl = $r->ttl($p . "ex");
    eq("TTL of EX key in range ($ttl)", $ttl > 0 && $ttl <= 100, true);
    eq("EXPIRE", $r->expire($p . "str", 500), 1);
    $ttl = $r->ttl($p . "str");
    eq("TTL after EXPIRE in range ($ttl)", $ttl > 0 && $ttl <= 500, true);
    eq("PERSIST", $r->persist($p . "str"), 1);
    eq("TTL persistent", $r->ttl($p . "str"), -1);
    eq("TTL missing", $r->ttl($p . "missing"), -2);

    // pipeline (no MULTI): keys on every node, replies in order
    $got = $r->pipeline(function ($pipe) use ($k, $p) {
        for ($i = 0; $i < 10; $i++) {
            $pipe->set($k("pipe$i"), (string) $i);
        }
        $pipe->incr($p . "counter");
        for ($i = 0; $i < 10; $i++) {
            $pipe->get($p . "pipe$i");
        }
        $pipe->mget([$p . "pipe0", $p . "pipe9", $p . "missing"]);
        $pipe->hget($p . "hash", "a");
    });
    $got = array_map('st', $got);
    $want = array_merge(
        array_fill(0, 10, "OK"),
        [43],
        array_map('strval', range(0, 9)),
        [["0", "9", null], "10"]
    );
    eq("pipeline", $got, $want);

    // EVAL with a key (and the script cache: EVALSHA of the same body)
    $script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])";
    eq("EVAL", $r->eval($script, 1, $k("lua"), "from-lua"), "from-lua");
    $sha = $r->script('load', $script);
    eq("SCRIPT LOAD", $sha, sha1($script));
    eq("EVALSHA", $r->evalsha($sha, 1, $p . "lua", "again"), "again");

    // error replies are thrown as ServerException, and the connection stays usable
    try {
        $r->incr($p . "str");
        fail("INCR on a non-number: expected an exception");
    } catch (Predis\Response\ServerException $e) {
        eq("INCR error text (" . $e->getMessage() . ")",
            strpos($e->getMessage(), "not an integer") !== false, true);
    }
    try {
        $r->lpush($p . "str", ["x"]);
        fail("LPUSH on a string: expected an exception");
    } catch (Predis\Response\ServerException $e) {
        eq("WRONGTYPE error (" . $e->getMessage() . ")", $e->getErrorType(), "WRONGTYPE");
    }
    eq("usable after errors", $r->get($p . "str"), "value");

    // SCAN visits every node: exactly the keys written under the prefix
    $seen = [];
    foreach (new Predis\Collection\Iterator\Keyspace($r, $p . "*", 50) as $key) {
        $seen[$key] = true;
    }
    $missing = array_diff(array_keys($written), array_keys($seen));
    $extra = array_diff(array_keys($seen), array_keys($written));
    if ($missing || $extra) {
        fail("SCAN: missing " . json_encode(array_values($missing))
            . ", unexpected " . json_encode(array_values($extra)));
    }
    $checks++;
    eq("DBSIZE >= written", $r->dbsize() >= count($written), true);

    // clean up
    eq("DEL all", $r->del(array_keys($written)), count($written));

    printf(
        "smoke_predis: ok: %d checks, %d keys, php %s, predis %s\n",
        $checks,
        count($written),
        PHP_VERSION,
        Predis\Client::VERSION
    );
} catch (Predis\PredisException $e) {
    fail("unexpected " . get_class($e) . ": " . $e->getMessage());
}
