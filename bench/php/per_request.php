<?php
// Per-request workload of the connection benchmarks (bench/connections.sh): a stateless PHP
// worker that, for every request, connects, runs 10 commands, and closes.
//
//     php per_request.php CLIENT TARGET REQUESTS [WARMUP]   one run; prints one JSON object
//     php per_request.php setup TARGET                       write the keys the workload reads
//     php per_request.php ping HOST:PORT COUNT               PING round trips on one connection
//     php per_request.php slots HOST:PORT                    CLUSTER SLOTS, one line per range
//     php per_request.php slotscost HOST:PORT COUNT          size of the CLUSTER SLOTS reply and
//                                                            time to fetch + parse it (JSON)
//
// CLIENT and TARGET:
//     phpredis-cluster  SEEDS (h:p,h:p,...)  phpredis RedisCluster, no persistent connections,
//                                            no slot cache (redis.clusters.cache_slots=0)
//     predis-cluster    SEEDS                predis Client(seeds, ['cluster' => 'redis'])
//     redcar-tcp        HOST:PORT            phpredis Redis to redcar over TCP
//     redcar-unix       PATH                 phpredis Redis to redcar's Unix socket
//
// One request, as the issue lists it (u = a user id, 100 of them, so keys spread over all slots):
//     GET page:u · SET session:u · INCR hits:u · EXPIRE hits:u 3600 · MGET flag:0..flag:9 (10 keys,
//     all three primaries) · HGETALL user:u · GET config:site · SET seen:u · INCR rate:u ·
//     EXPIRE rate:u 60
// predis cannot send a cross-slot MGET to a cluster ("Cannot use 'MGET' with redis-cluster"), so
// for predis the MGET is a pipeline of 10 GETs (written to all nodes before any reply is read),
// which is what a predis application does instead.
//
// Timed per request: from before connect to after close (`req`), and from before connect to the
// first reply (`first`: for a cluster client that includes its topology discovery). Warm-up
// requests (default 20) are not recorded.

const USERS = 100;

function fail(string $msg): void
{
    fwrite(STDERR, "per_request: $msg\n");
    exit(1);
}

function hostport(string $s): array
{
    $i = strrpos($s, ':');
    if ($i === false) {
        fail("expected HOST:PORT, got '$s'");
    }
    return [substr($s, 0, $i), (int) substr($s, $i + 1)];
}

function flags(): array
{
    $keys = [];
    for ($i = 0; $i < 10; $i++) {
        $keys[] = "flag:$i";
    }
    return $keys;
}

function load_predis(): void
{
    if (!(@include_once 'Predis/autoload.php') || !class_exists('Predis\Client')) {
        fail("predis is not installed: run scripts/ensure-clients.sh (apt-get install php-predis)");
    }
}

/** Returns [connect-function, close-function] for a client kind. */
function client(string $kind, string $target): array
{
    switch ($kind) {
        case 'phpredis-cluster':
            $seeds = explode(',', $target);
            return [
                fn() => new RedisCluster(null, $seeds, 1.0, 1.0, false),
                fn($c) => $c->close(),
            ];
        case 'predis-cluster':
            load_predis();
            $seeds = array_map(fn($s) => "tcp://$s?timeout=1.0", explode(',', $target));
            return [
                fn() => new Predis\Client($seeds, ['cluster' => 'redis']),
                fn($c) => $c->disconnect(),
            ];
        case 'redcar-tcp':
            [$host, $port] = hostport($target);
            return [
                function () use ($host, $port) {
                    $r = new Redis();
                    if (!$r->connect($host, $port, 1.0)) {
                        fail("connect to $host:$port failed");
                    }
                    return $r;
                },
                fn($c) => $c->close(),
            ];
        case 'redcar-unix':
            return [
                function () use ($target) {
                    $r = new Redis();
                    if (!$r->connect($target)) {
                        fail("connect to $target failed");
                    }
                    return $r;
                },
                fn($c) => $c->close(),
            ];
    }
    fail("unknown client '$kind'");
}

/** One request's 10 commands after the first GET; checks the replies that must be known. */
function rest_of_request($c, bool $predis, int $u): void
{
    $c->set("session:$u", "s$u");
    $hits = $c->incr("hits:$u");
    $c->expire("hits:$u", 3600);
    if ($predis) {
        // The MGET's keys are in different slots: predis cannot send it to a cluster. Pipeline
        // 10 GETs instead, once the slot map is known (a predis pipeline does not follow MOVED).
        $conn = $c->getConnection();
        if (!$conn->getSlotsMap()) {
            $conn->askSlotsMap();
        }
        $flags = $c->pipeline(function ($p) {
            foreach (flags() as $k) {
                $p->get($k);
            }
        });
    } else {
        $flags = $c->mget(flags());
    }
    $user = $c->hgetall("user:$u");
    $c->get("config:site");
    $c->set("seen:$u", (string) time());
    $c->incr("rate:$u");
    $c->expire("rate:$u", 60);
    if (!is_int($hits) || count($flags) !== 10 || $flags[9] !== "on9" || ($user['id'] ?? null) !== (string) $u) {
        fail("unexpected replies: " . json_encode([$hits, $flags, $user]));
    }
}

function pct(array $sorted, float $p): float
{
    $n = count($sorted);
    return $sorted[min($n - 1, (int) floor($p * $n))];
}

function stats(array $xs): array
{
    sort($xs);
    return [
        'mean' => array_sum($xs) / count($xs),
        'p50' => pct($xs, 0.50),
        'p99' => pct($xs, 0.99),
        'max' => end($xs),
    ];
}

function run(string $kind, string $target, int $n, int $warmup): void
{
    [$connect, $close] = client($kind, $target);
    $predis = $kind === 'predis-cluster';
    $req = [];
    $first = [];
    for ($i = 0; $i < $warmup + $n; $i++) {
        $u = $i % USERS;
        $t0 = hrtime(true);
        $c = $connect();
        $page = $c->get("page:$u");
        $t1 = hrtime(true);
        rest_of_request($c, $predis, $u);
        $close($c);
        $c = null;
        $t2 = hrtime(true);
        if ($page !== "page $u") {
            fail("GET page:$u: " . var_export($page, true));
        }
        if ($i >= $warmup) {
            $req[] = ($t2 - $t0) / 1e6;
            $first[] = ($t1 - $t0) / 1e6;
        }
    }
    echo json_encode([
        'client' => $kind,
        'requests' => $n,
        'req_ms' => stats($req),
        'first_ms' => stats($first),
    ]), "\n";
}

function setup(string $target): void
{
    // Through redcar (one endpoint): plain phpredis handles cross-slot MSET there.
    [$connect, $close] = client(str_contains($target, '/') ? 'redcar-unix' : 'redcar-tcp', $target);
    $c = $connect();
    $flags = [];
    foreach (flags() as $i => $k) {
        $flags[$k] = "on$i";
    }
    $c->mset($flags);
    $c->set("config:site", str_repeat("c", 200));
    for ($u = 0; $u < USERS; $u++) {
        $c->set("page:$u", "page $u");
        $c->hMSet("user:$u", ['id' => (string) $u, 'name' => "user $u", 'plan' => 'free', 'since' => '2024-01-01']);
    }
    $close($c);
    echo "ok\n";
}

function ping(string $target, int $n): void
{
    [$host, $port] = hostport($target);
    $r = new Redis();
    if (!$r->connect($host, $port, 1.0)) {
        fail("connect to $target failed");
    }
    $r->ping();
    $xs = [];
    for ($i = 0; $i < $n; $i++) {
        $t = hrtime(true);
        $r->ping();
        $xs[] = (hrtime(true) - $t) / 1e6;
    }
    $r->close();
    echo json_encode(['target' => $target, 'pings' => $n, 'rtt_ms' => stats($xs)]), "\n";
}

function slots(string $target): void
{
    [$host, $port] = hostport($target);
    $r = new Redis();
    if (!$r->connect($host, $port, 1.0)) {
        fail("connect to $target failed");
    }
    $ranges = $r->rawCommand('CLUSTER', 'SLOTS');
    usort($ranges, fn($a, $b) => $a[0] <=> $b[0]);
    foreach ($ranges as $range) {
        $nodes = array_map(fn($n) => "$n[0]:$n[1]", array_slice($range, 2));
        echo "$range[0]-$range[1] " . implode(' ', $nodes) . "\n";
    }
    $r->close();
}

/** Size in bytes of a RESP2 reply as phpredis returned it (arrays, integers, bulk strings). */
function resp_bytes($v): int
{
    if (is_array($v)) {
        $n = strlen('*' . count($v)) + 2;
        foreach ($v as $x) {
            $n += resp_bytes($x);
        }
        return $n;
    }
    if (is_int($v)) {
        return strlen(":$v") + 2;
    }
    return strlen('$' . strlen((string) $v)) + 2 + strlen((string) $v) + 2;
}

/**
 * What CLUSTER SLOTS costs a client: the reply's size and range count, the time to fetch and
 * parse it (phpredis rawCommand: read + build the PHP arrays) on an open connection, and the
 * time to connect + fetch + parse + close on a fresh connection (what a per-request cluster
 * client pays for its topology before its first command, minus building its own slot table).
 */
function slotscost(string $target, int $n): void
{
    [$host, $port] = hostport($target);
    $r = new Redis();
    if (!$r->connect($host, $port, 1.0)) {
        fail("connect to $target failed");
    }
    $ranges = $r->rawCommand('CLUSTER', 'SLOTS');
    $bytes = resp_bytes($ranges);
    $open = [];
    for ($i = 0; $i < $n; $i++) {
        $t = hrtime(true);
        $x = $r->rawCommand('CLUSTER', 'SLOTS');
        $open[] = (hrtime(true) - $t) / 1e6;
    }
    $r->close();
    $fresh = [];
    for ($i = 0; $i < $n; $i++) {
        $t = hrtime(true);
        $c = new Redis();
        if (!$c->connect($host, $port, 1.0)) {
            fail("connect to $target failed");
        }
        $x = $c->rawCommand('CLUSTER', 'SLOTS');
        $c->close();
        $fresh[] = (hrtime(true) - $t) / 1e6;
    }
    echo json_encode([
        'target' => $target,
        'count' => $n,
        'ranges' => count($ranges),
        'bytes' => $bytes,
        'open_ms' => stats($open),
        'fresh_ms' => stats($fresh),
    ]), "\n";
}

if (!class_exists('Redis')) {
    fail("phpredis is not installed: run scripts/ensure-clients.sh (apt-get install php-redis)");
}
ini_set('redis.clusters.cache_slots', '0');
$mode = $argv[1] ?? '';
try {
    if ($mode === 'setup' && $argc === 3) {
        setup($argv[2]);
    } elseif ($mode === 'slots' && $argc === 3) {
        slots($argv[2]);
    } elseif ($mode === 'slotscost' && $argc === 4) {
        slotscost($argv[2], (int) $argv[3]);
    } elseif ($mode === 'ping' && $argc === 4) {
        ping($argv[2], (int) $argv[3]);
    } elseif ($argc === 4 || $argc === 5) {
        run($mode, $argv[2], (int) $argv[3], (int) ($argv[4] ?? 20));
    } else {
        fwrite(STDERR, "usage: php per_request.php CLIENT TARGET REQUESTS [WARMUP] | setup TARGET | ping HOST:PORT COUNT | slots HOST:PORT | slotscost HOST:PORT COUNT\n");
        exit(2);
    }
} catch (Throwable $e) {
    fail(get_class($e) . ": " . $e->getMessage());
}
