<?php
// Smoke test: predis (`Predis\Client`, no cluster option) against redcar as if it were one node.
//
//     php smoke_predis.php HOST PORT
//
// Exercises every data type, a pipeline, a transaction, WATCH, BLPOP, pub/sub, EVAL, SCAN and an
// error reply; exits 1 with a message at the first mismatch. Run by tests/it/clients.rs (`cargo test --test it clients`); needs
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
    $options = [
        'scheme' => 'tcp',
        'host' => $host,
        'port' => $port,
        'timeout' => 5.0,
        'read_write_timeout' => 10,
    ];
    $r = new Predis\Client($options);
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

    // transaction: transaction() sends MULTI … EXEC; every key has the hash tag {tx} (one slot,
    // as redcar requires)
    $got = $r->transaction(function ($tx) use ($k, $p) {
        $tx->set($k("{tx}a"), "1");
        $tx->incrby($p . "{tx}a", 41);
        $tx->rpush($k("{tx}list"), ["x", "y"]);
        $tx->get($p . "{tx}a");
    });
    eq("transaction()", array_map('st', $got), ["OK", 42, 2, "42"]);

    // WATCH: a check-and-set transaction that succeeds, and one another client's write aborts
    $cas = function ($tx) use ($p) {
        $current = (int) $tx->get($p . "{tx}a");
        $tx->multi();
        $tx->set($p . "{tx}a", (string) ($current + 1));
        $tx->get($p . "{tx}a");
    };
    $got = $r->transaction(['watch' => $p . "{tx}a", 'cas' => true, 'retry' => 3], $cas);
    eq("WATCH … EXEC (cas)", array_map('st', $got), ["OK", "43"]);
    $other = new Predis\Client($options);
    try {
        $r->transaction(
            ['watch' => $p . "{tx}a", 'cas' => true, 'retry' => 0],
            function ($tx) use ($p, $other) {
                $tx->get($p . "{tx}a");
                $other->set($p . "{tx}a", "100");
                $tx->multi();
                $tx->set($p . "{tx}a", "lost");
            }
        );
        fail("EXEC after a watched key changed: expected AbortedMultiExecException");
    } catch (Predis\Transaction\AbortedMultiExecException $e) {
        $checks++;
    }
    eq("GET after the aborted transaction", $r->get($p . "{tx}a"), "100");

    // BLPOP: with data it returns at once; on an empty list it gives null after its timeout
    eq("RPUSH queue", $r->rpush($k("{tx}queue"), ["job1", "job2"]), 2);
    $t0 = microtime(true);
    eq("BLPOP with data", $r->blpop([$p . "{tx}queue"], 5), [$p . "{tx}queue", "job1"]);
    $waited = microtime(true) - $t0;
    eq(sprintf("BLPOP with data returns at once (%.3fs)", $waited), $waited < 1, true);
    $t0 = microtime(true);
    eq("BLPOP on an empty list", $r->blpop([$p . "{tx}empty"], 0.1), null);
    $waited = microtime(true) - $t0;
    eq(sprintf("BLPOP waited its 0.1 s timeout (%.3fs)", $waited), $waited >= 0.09 && $waited < 5, true);

    // pub/sub: pubSubLoop() on its own connection, PUBLISH from this one once subscribed
    $chan = $p . "news";
    $sub = new Predis\Client($options);
    $loop = $sub->pubSubLoop();
    $loop->subscribe($chan);
    $loop->psubscribe($p . "n*");
    $seen = [];
    foreach ($loop as $m) {
        $seen[] = [$m->kind, $m->channel, $m->payload];
        if ($m->kind === 'psubscribe') {
            // Redis Cluster semantics: the receivers on the node PUBLISH reached (0 or 2)
            $receivers = $r->publish($chan, "hello");
            eq("PUBLISH receivers ($receivers)", in_array($receivers, [0, 2], true), true);
        } elseif ($m->kind === 'pmessage') {
            $loop->unsubscribe();
            $loop->punsubscribe();
        }
    }
    eq("pub/sub messages", $seen, [
        ["subscribe", $chan, 1],
        ["psubscribe", $p . "n*", 2],
        ["message", $chan, "hello"],
        ["pmessage", $chan, "hello"],
        ["unsubscribe", $chan, 1],
        ["punsubscribe", $p . "n*", 0],
    ]);
    eq("PUBSUB NUMSUB after unsubscribing", $r->pubsub("numsub", $chan), [$chan => 0]);
    eq("PUBLISH with nobody listening", $r->publish($chan, "again"), 0);

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
