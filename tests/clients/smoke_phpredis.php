<?php
// Smoke test: phpredis (`new Redis()`, not RedisCluster) against redcar as if it were one node.
//
//     php smoke_phpredis.php HOST PORT
//
// Exercises every data type, a pipeline, a transaction, WATCH, BLPOP, pub/sub, EVAL, SCAN and an
// error reply; exits 1 with a message at the first mismatch. Run by tests/it/clients.rs (`cargo test --test it clients`); needs
// php-cli and php-redis (scripts/ensure-clients.sh).

$checks = 0;

function fail(string $msg): void
{
    fwrite(STDERR, "smoke_phpredis: FAIL: $msg\n");
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

if (!class_exists('Redis')) {
    fail("phpredis is not installed: run scripts/ensure-clients.sh (make test does), "
        . "or apt-get install php-cli php-redis");
}
if ($argc !== 3) {
    fwrite(STDERR, "usage: php smoke_phpredis.php HOST PORT\n");
    exit(2);
}
[$host, $port] = [$argv[1], (int) $argv[2]];

try {
    $r = new Redis();
    if (!$r->connect($host, $port, 5.0)) {
        fail("connect to $host:$port failed");
    }
    $r->setOption(Redis::OPT_READ_TIMEOUT, 10);

    $p = "smoke:phpredis:" . getmypid() . ":";
    $written = [];
    $k = function (string $name) use ($p, &$written): string {
        $written[$p . $name] = true;
        return $p . $name;
    };

    eq("PING", $r->ping(), true);
    eq("ECHO", $r->echo("hello"), "hello");

    // strings
    eq("SET", $r->set($k("str"), "value"), true);
    eq("GET", $r->get($p . "str"), "value");
    eq("GET missing", $r->get($p . "missing"), false);
    eq("INCR", $r->incr($k("counter")), 1);
    eq("INCRBY", $r->incrBy($p . "counter", 41), 42);
    eq("SET EX", $r->set($k("ex"), "x", ['EX' => 100]), true);

    // MSET/MGET over keys in different slots: redcar splits and merges them
    $many = [];
    for ($i = 0; $i < 20; $i++) {
        $many[$k("m$i")] = "v$i";
    }
    eq("MSET", $r->mSet($many), true);
    $names = array_merge(array_keys($many), [$p . "missing"]);
    eq("MGET", $r->mGet($names), array_merge(array_values($many), [false]));

    // DEL of several keys across slots
    $gone = [];
    for ($i = 0; $i < 5; $i++) {
        $gone[] = $p . "m$i";
        unset($written[$p . "m$i"]);
    }
    eq("DEL", $r->del(array_merge($gone, [$p . "missing"])), 5);
    eq("EXISTS", $r->exists(array_merge($gone, [$p . "m5", $p . "m6"])), 2);

    // hash
    eq("HSET", $r->hMSet($k("hash"), ["a" => "1", "b" => "2", "c" => "3"]), true);
    eq("HGET", $r->hGet($p . "hash", "b"), "2");
    eq("HGETALL", $r->hGetAll($p . "hash"), ["a" => "1", "b" => "2", "c" => "3"]);
    eq("HINCRBY", $r->hIncrBy($p . "hash", "a", 9), 10);
    eq("HDEL", $r->hDel($p . "hash", "c"), 1);
    eq("HLEN", $r->hLen($p . "hash"), 2);

    // list
    eq("RPUSH", $r->rPush($k("list"), "a", "b", "c"), 3);
    eq("LPUSH", $r->lPush($p . "list", "z"), 4);
    eq("LRANGE", $r->lRange($p . "list", 0, -1), ["z", "a", "b", "c"]);
    eq("LPOP", $r->lPop($p . "list"), "z");
    eq("RPOP", $r->rPop($p . "list"), "c");
    eq("LLEN", $r->lLen($p . "list"), 2);

    // set
    eq("SADD", $r->sAdd($k("set"), "x", "y", "z", "x"), 3);
    $members = $r->sMembers($p . "set");
    sort($members);
    eq("SMEMBERS", $members, ["x", "y", "z"]);
    eq("SISMEMBER", $r->sIsMember($p . "set", "y"), true);
    eq("SREM", $r->sRem($p . "set", "y"), 1);
    eq("SCARD", $r->sCard($p . "set"), 2);

    // sorted set
    eq("ZADD", $r->zAdd($k("zset"), 1, "a", 2.5, "b", 3, "c"), 3);
    eq("ZRANGE WITHSCORES", $r->zRange($p . "zset", 0, -1, true), ["a" => 1.0, "b" => 2.5, "c" => 3.0]);
    eq("ZSCORE", $r->zScore($p . "zset", "b"), 2.5);
    eq("ZINCRBY", $r->zIncrBy($p . "zset", 10, "a"), 11.0);
    eq("ZRANK", $r->zRank($p . "zset", "a"), 2);
    eq("ZRANGEBYSCORE", $r->zRangeByScore($p . "zset", 2, 5), ["b", "c"]);

    // expiry
    $ttl = $r->ttl($p . "ex");
    eq("TTL of EX key in range ($ttl)", $ttl > 0 && $ttl <= 100, true);
    eq("EXPIRE", $r->expire($p . "str", 500), true);
    $ttl = $r->ttl($p . "str");
    eq("TTL after EXPIRE in range ($ttl)", $ttl > 0 && $ttl <= 500, true);
    eq("PERSIST", $r->persist($p . "str"), true);
    eq("TTL persistent", $r->ttl($p . "str"), -1);
    eq("TTL missing", $r->ttl($p . "missing"), -2);

    // pipelines (no MULTI): pipeline() and multi(Redis::PIPELINE), keys on every node
    $pipe = $r->pipeline();
    for ($i = 0; $i < 10; $i++) {
        $pipe->set($k("pipe$i"), (string) $i);
    }
    $pipe->incr($p . "counter");
    for ($i = 0; $i < 10; $i++) {
        $pipe->get($p . "pipe$i");
    }
    $pipe->mGet([$p . "pipe0", $p . "pipe9", $p . "missing"]);
    $pipe->hGet($p . "hash", "a");
    $want = array_merge(
        array_fill(0, 10, true),
        [43],
        array_map('strval', range(0, 9)),
        [["0", "9", false], "10"]
    );
    eq("pipeline()", $pipe->exec(), $want);
    $got = $r->multi(Redis::PIPELINE)
        ->incr($p . "counter")
        ->get($p . "pipe3")
        ->del($p . "pipe8", $p . "pipe9")
        ->exec();
    unset($written[$p . "pipe8"], $written[$p . "pipe9"]);
    eq("multi(Redis::PIPELINE)", $got, [44, "3", 2]);

    // EVAL with a key (and the script cache: EVALSHA of the same body)
    $script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])";
    eq("EVAL", $r->eval($script, [$k("lua"), "from-lua"], 1), "from-lua");
    $sha = $r->script('load', $script);
    eq("SCRIPT LOAD", $sha, sha1($script));
    eq("EVALSHA", $r->evalSha($sha, [$p . "lua", "again"], 1), "again");

    // error replies: phpredis returns false and keeps the message in getLastError()
    $r->clearLastError();
    eq("INCR on non-number", $r->incr($p . "str"), false);
    $err = (string) $r->getLastError();
    eq("INCR error text ($err)", strpos($err, "not an integer") !== false, true);
    $r->clearLastError();
    eq("LPUSH on a string", $r->lPush($p . "str", "x"), false);
    $err = (string) $r->getLastError();
    eq("WRONGTYPE error ($err)", strpos($err, "WRONGTYPE") === 0, true);
    eq("usable after errors", $r->get($p . "str"), "value");

    // transaction: multi() … exec(), every key with the hash tag {tx} (one slot, as redcar
    // requires); a command failing inside EXEC (WRONGTYPE) gives false, the others run
    $got = $r->multi()
        ->set($k("{tx}a"), "1")
        ->incrBy($p . "{tx}a", 41)
        ->rPush($k("{tx}list"), "x", "y")
        ->get($p . "{tx}a")
        ->exec();
    eq("multi()/exec()", $got, [true, 42, 2, "42"]);
    eq("WRONGTYPE inside exec()", $r->multi()->lPush($p . "{tx}a", "x")->incr($p . "{tx}a")->exec(),
        [false, 43]);

    // WATCH: an optimistic update that succeeds, and one another client's write aborts
    eq("WATCH", $r->watch($p . "{tx}a"), true);
    $current = (int) $r->get($p . "{tx}a");
    eq("WATCH … EXEC", $r->multi()->set($p . "{tx}a", (string) ($current + 1))->get($p . "{tx}a")->exec(),
        [true, "44"]);
    $other = new Redis();
    if (!$other->connect($host, $port, 5.0)) {
        fail("second connection to $host:$port failed");
    }
    eq("WATCH again", $r->watch($p . "{tx}a"), true);
    eq("write by another client", $other->set($p . "{tx}a", "100"), true);
    eq("EXEC after the watched key changed", $r->multi()->set($p . "{tx}a", "lost")->exec(), false);
    eq("GET after the aborted transaction", $r->get($p . "{tx}a"), "100");

    // BLPOP: with data it returns at once; on an empty list it gives nothing after its timeout.
    // phpredis 5.3's blPop() takes whole seconds only ("Timeout value must be a LONG"), so the
    // 0.1 s one goes through rawCommand().
    eq("RPUSH queue", $r->rPush($k("{tx}queue"), "job1", "job2"), 2);
    $t0 = microtime(true);
    eq("BLPOP with data", $r->blPop([$p . "{tx}queue"], 5), [$p . "{tx}queue", "job1"]);
    $waited = microtime(true) - $t0;
    eq(sprintf("BLPOP with data returns at once (%.3fs)", $waited), $waited < 1, true);
    $t0 = microtime(true);
    eq("BLPOP 0.1 on an empty list", $r->rawCommand("BLPOP", $p . "{tx}empty", "0.1"), []);
    $waited = microtime(true) - $t0;
    eq(sprintf("BLPOP waited its 0.1 s timeout (%.3fs)", $waited), $waited >= 0.09 && $waited < 5, true);

    // pub/sub: subscribe() blocks in a callback loop, so another process publishes once
    // PUBSUB NUMSUB (merged over the primaries by redcar) shows the subscriber. phpredis 5.3
    // leaves the loop only on a reply that is not a message, or an error: the callback
    // unsubscribes, then closes its connection, which ends subscribe() with an exception.
    $chan = $p . "news";
    $publisher = '$c = new Redis(); $c->connect($argv[1], (int) $argv[2], 5.0); $ch = $argv[3];'
        . ' for ($i = 0; $i < 500; $i++) { $n = $c->pubsub("numsub", [$ch]);'
        . ' if (($n[$ch] ?? 0) >= 1) { break; } usleep(10000); }'
        . ' exit($c->publish($ch, "hello") === false ? 1 : 0);';
    $devnull = ['file', '/dev/null', 'r'];
    $proc = proc_open(
        [PHP_BINARY, '-r', $publisher, $host, (string) $port, $chan],
        [0 => $devnull, 1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w']],
        $pipes
    );
    if (!is_resource($proc)) {
        fail("could not start the publisher process");
    }
    $sub = new Redis();
    if (!$sub->connect($host, $port, 5.0)) {
        fail("subscriber connection to $host:$port failed");
    }
    $sub->setOption(Redis::OPT_READ_TIMEOUT, 10);
    $received = [];
    try {
        $sub->subscribe([$chan], function ($redis, $channel, $message) use (&$received) {
            $received[] = [$channel, $message];
            $received[] = $redis->unsubscribe([$channel]);
            $redis->close();
        });
        fail("subscribe() returned without the callback closing its connection");
    } catch (RedisException $e) {
        // the close() in the callback; a read timeout instead shows up as no message below
    }
    $publisherErrors = stream_get_contents($pipes[2]);
    fclose($pipes[2]);
    eq("publisher exit status ($publisherErrors)", proc_close($proc), 0);
    eq("message received, then UNSUBSCRIBE", $received, [[$chan, "hello"], [$chan => true]]);
    eq("PUBSUB NUMSUB after unsubscribing", $r->pubsub("numsub", [$chan]), [$chan => 0]);
    eq("PUBLISH with nobody listening", $r->publish($chan, "again"), 0);

    // SCAN visits every node: exactly the keys written under the prefix
    $r->setOption(Redis::OPT_SCAN, Redis::SCAN_RETRY);
    $seen = [];
    $it = null;
    while (($batch = $r->scan($it, $p . "*", 50)) !== false) {
        foreach ($batch as $key) {
            $seen[$key] = true;
        }
    }
    $missing = array_diff(array_keys($written), array_keys($seen));
    $extra = array_diff(array_keys($seen), array_keys($written));
    if ($missing || $extra) {
        fail("SCAN: missing " . json_encode(array_values($missing))
            . ", unexpected " . json_encode(array_values($extra)));
    }
    $checks++;
    eq("DBSIZE >= written", $r->dbSize() >= count($written), true);

    // clean up
    eq("DEL all", $r->del(array_keys($written)), count($written));

    printf(
        "smoke_phpredis: ok: %d checks, %d keys, php %s, phpredis %s\n",
        $checks,
        count($written),
        PHP_VERSION,
        phpversion('redis')
    );
} catch (RedisException $e) {
    fail("unexpected RedisException: " . $e->getMessage());
}
