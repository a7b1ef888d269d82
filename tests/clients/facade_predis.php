<?php
// Cluster facade: predis in cluster mode (`['cluster' => 'redis']`) pointed at redcar's
// cluster-facade listener.
//
//     php facade_predis.php HOST PORT
//
// predis reads CLUSTER SLOTS when it lists the cluster's nodes; there must be one, redcar
// (HOST:PORT), owning every slot.
// SET/GET on keys in many slots, and MGET on keys sharing a hash tag (predis itself refuses a
// cross-slot MGET in cluster mode, before sending anything). Exits 1 at the first mismatch.
// Run by tests/it/facade.rs (`cargo test --test it facade`).

function fail(string $msg): void
{
    fwrite(STDERR, "facade_predis: FAIL: $msg\n");
    exit(1);
}

function eq(string $what, $got, $want): void
{
    if ($got !== $want) {
        fail("$what: expected " . var_export($want, true) . ", got " . var_export($got, true));
    }
}

function st($reply)
{
    return $reply instanceof Predis\Response\Status ? (string) $reply : $reply;
}

if (!(@include_once 'Predis/autoload.php') || !class_exists('Predis\Client')) {
    fail("predis is not installed: run scripts/ensure-clients.sh (make test does)");
}
[$host, $port] = [$argv[1], (int) $argv[2]];

try {
    $client = new Predis\Client(
        ["tcp://$host:$port?timeout=5&read_write_timeout=10"],
        ['cluster' => 'redis']
    );
    $p = "facade:predis:" . getmypid() . ":";
    $keys = [];
    for ($i = 0; $i < 20; $i++) {
        $keys[] = $p . $i;
    }
    foreach ($keys as $i => $key) {
        eq("SET $key", st($client->set($key, "v$i")), "OK");
    }
    foreach ($keys as $i => $key) {
        eq("GET $key", $client->get($key), "v$i");
    }
    // predis 1.x asks CLUSTER SLOTS after a MOVED (redcar never sends one) or when the nodes
    // are listed, as applications do to run a command on every node: list them.
    $nodes = [];
    foreach ($client->getConnection() as $node) {
        $nodes[] = (string) $node;
    }
    eq("nodes from CLUSTER SLOTS", $nodes, ["$host:$port"]);
    $map = $client->getConnection()->getSlotsMap();
    eq("slots in the map", count($map), 16384);
    eq("owners in the map", array_values(array_unique($map)), ["$host:$port"]);
    $tagged = ["{" . $p . "t}a", "{" . $p . "t}b"];
    eq("MSET one slot", st($client->mset([$tagged[0] => "a", $tagged[1] => "b"])), "OK");
    eq("MGET one slot", $client->mget($tagged), ["a", "b"]);
    foreach ($keys as $key) {
        eq("DEL $key", $client->del([$key]), 1);
    }
    eq("DEL one slot", $client->del($tagged), 2);
    eq("GET after DEL", $client->get($keys[0]), null);
    echo "ok: predis cluster mode through the facade\n";
} catch (Exception $e) {
    fail(get_class($e) . ": " . $e->getMessage());
}
