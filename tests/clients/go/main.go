// Command redcar-go-clients drives redcar with go-redis v9, as tests/it/clients.rs and
// tests/it/facade.rs expect of a client script:
//
//	REDCAR_CLUSTER_NODE=HOST:PORT redcar-go-clients smoke HOST PORT   # redis.NewClient
//	REDCAR_CLUSTER_NODE=HOST:PORT redcar-go-clients facade HOST PORT  # redis.NewClusterClient
//
// Every check runs with go-redis's default (`Protocol: 3`, `HELLO 3`) and with `Protocol: 2`;
// HELLO must report that protocol. Every write is read back from the real cluster with
// `redis-cli -c` against REDCAR_CLUSTER_NODE. The first mismatch exits 1 with what was
// expected and what came back. Built into target/go-clients/ by scripts/ensure-go-clients.sh.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	ctx    = context.Background()
	checks int
	script = "go-redis"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: FAIL: %s\n", script, fmt.Sprintf(format, args...))
	os.Exit(1)
}

func eq(what string, got, want any) {
	checks++
	if !reflect.DeepEqual(got, want) {
		fail("%s: expected %#v, got %#v", what, want, got)
	}
}

// must fails on a command error (naming the line that called it) and returns the value.
func must[T any](v T, err error) T {
	check(err)
	return v
}

func check(err error) {
	if err == nil {
		return
	}
	for skip := 1; ; skip++ {
		pc, _, line, ok := runtime.Caller(skip)
		if !ok {
			fail("%v", err)
		}
		if name := runtime.FuncForPC(pc).Name(); !strings.HasPrefix(name, "main.must") && name != "main.check" {
			fail("main.go:%d: %v", line, err)
		}
	}
}

// direct runs each command on the real cluster with `redis-cli -c` (one process, redirects
// followed) and returns one reply line per command (raw strings, integers as digits, nil "").
func direct(commands ...[]string) []string {
	node := os.Getenv("REDCAR_CLUSTER_NODE")
	host, port, ok := strings.Cut(node, ":")
	if !ok {
		fail("REDCAR_CLUSTER_NODE=HOST:PORT (a node of the real cluster) must be set, got %q", node)
	}
	var in strings.Builder
	for _, c := range commands {
		in.WriteString(strings.Join(c, " ") + "\n")
	}
	cmd := exec.Command("redis-cli", "-c", "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		fail("redis-cli -c -p %s: %v", port, err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if !strings.HasPrefix(l, "-> Redirected to slot") {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(commands) {
		fail("redis-cli: %d commands, %d reply lines: %q", len(commands), len(lines), out)
	}
	return lines
}

func gets(keys []string) [][]string {
	var c [][]string
	for _, k := range keys {
		c = append(c, []string{"GET", k})
	}
	return c
}

// helloProto is HELLO's `proto` field, from a RESP3 map or a RESP2 flat array.
func helloField(reply any, field string) string {
	switch r := reply.(type) {
	case map[any]any:
		return fmt.Sprint(r[field])
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			if fmt.Sprint(r[i]) == field {
				return fmt.Sprint(r[i+1])
			}
		}
	}
	fail("HELLO reply of unexpected shape: %#v", reply)
	return ""
}

func values(n int, suffix string) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = "v" + strconv.Itoa(i) + suffix
	}
	return v
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: redcar-go-clients smoke|facade HOST PORT")
		os.Exit(2)
	}
	addr := os.Args[2] + ":" + os.Args[3]
	var notes []string
	switch os.Args[1] {
	case "smoke":
		script = "smoke_go_redis"
		for _, proto := range []int{0, 2} {
			notes = append(notes, smoke(addr, proto))
		}
	case "facade":
		script = "facade_go_redis"
		for _, proto := range []int{0, 2} {
			notes = append(notes, facade(addr, proto))
		}
	default:
		fail("unknown mode %q", os.Args[1])
	}
	fmt.Printf("%s: ok: %d checks, go-redis %s; %s\n", script, checks, redis.Version(), strings.Join(notes, "; "))
}

func protoName(proto int) (int, string) {
	if proto == 0 {
		return 3, "RESP3 (default)"
	}
	return proto, "RESP" + strconv.Itoa(proto)
}

// smoke runs the checks on a plain client; proto 0 is go-redis's default.
func smoke(addr string, proto int) string {
	want, name := protoName(proto)
	opts := &redis.Options{
		Addr: addr, Protocol: proto, DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, PoolSize: 4, PoolFIFO: true,
	}
	r := redis.NewClient(opts)
	defer r.Close()

	hello := must(r.Do(ctx, "HELLO").Result())
	eq("HELLO proto", helloField(hello, "proto"), strconv.Itoa(want))
	eq("PING", must(r.Ping(ctx).Result()), "PONG")
	p := fmt.Sprintf("smoke:goredis:%d:%d:", os.Getpid(), want)

	keys := make([]string, 40)
	slots := map[int64]bool{}
	for i := range keys {
		keys[i] = p + "k" + strconv.Itoa(i)
		slots[must(strconv.ParseInt(direct([]string{"CLUSTER", "KEYSLOT", keys[i]})[0], 10, 64))] = true
	}
	if len(slots) < 30 {
		fail("keys should span many slots, got %d", len(slots))
	}
	for i, k := range keys {
		eq("SET "+k, must(r.Set(ctx, k, "v"+strconv.Itoa(i), 0).Result()), "OK")
	}
	for i, k := range keys {
		eq("GET "+k, must(r.Get(ctx, k).Result()), "v"+strconv.Itoa(i))
	}
	eq("direct GETs", direct(gets(keys)...), values(len(keys), ""))
	_, err := r.Get(ctx, p+"missing").Result()
	eq("GET missing", err, redis.Nil)

	mget := must(r.MGet(ctx, append(append([]string{}, keys...), p+"missing")...).Result())
	wantMget := []any{}
	for _, v := range values(len(keys), "") {
		wantMget = append(wantMget, v)
	}
	eq("MGET across slots", mget, append(wantMget, nil))

	// A pipeline over keys on every node, answered in order.
	cmds := must(r.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, k := range keys {
			if i%2 == 1 {
				pipe.Get(ctx, k)
			} else {
				pipe.Incr(ctx, k+":n")
			}
		}
		return nil
	}))
	for i, c := range cmds {
		if i%2 == 1 {
			eq("pipelined GET", c.(*redis.StringCmd).Val(), "v"+strconv.Itoa(i))
		} else {
			eq("pipelined INCR", c.(*redis.IntCmd).Val(), int64(1))
		}
	}
	var counters [][]string
	var ones []string
	var extra []string
	for i, k := range keys {
		if i%2 == 0 {
			counters = append(counters, []string{"GET", k + ":n"})
			ones = append(ones, "1")
			extra = append(extra, k+":n")
		}
	}
	eq("direct INCR results", direct(counters...), ones)
	eq("DEL across slots", must(r.Del(ctx, append(append([]string{}, keys[:10]...), p+"missing")...).Result()), int64(10))
	var exists [][]string
	var wantExists []string
	for i, k := range keys[:12] {
		exists = append(exists, []string{"EXISTS", k})
		wantExists = append(wantExists, map[bool]string{true: "0", false: "1"}[i < 10])
	}
	eq("direct EXISTS after DEL", direct(exists...), wantExists)

	// MULTI/EXEC on one hash tag; a command failing inside EXEC fails alone.
	tag := p + "{tx}"
	tx := must(r.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, tag+"a", "1", 0)
		pipe.IncrBy(ctx, tag+"n", 5)
		pipe.Get(ctx, tag+"a")
		pipe.HSet(ctx, tag+"h", "f", "x", "g", "y")
		return nil
	}))
	eq("EXEC replies", []any{tx[0].(*redis.StatusCmd).Val(), tx[1].(*redis.IntCmd).Val(), tx[2].(*redis.StringCmd).Val(), tx[3].(*redis.IntCmd).Val()},
		[]any{"OK", int64(5), "1", int64(2)})
	eq("direct after EXEC", direct([]string{"GET", tag + "a"}, []string{"GET", tag + "n"}, []string{"HGET", tag + "h", "g"}), []string{"1", "5", "y"})
	failed, err := r.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, tag+"s", "x", 0)
		pipe.LPush(ctx, tag+"s", "y")
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") || len(failed) != 2 || failed[0].Err() != nil {
		fail("EXEC with a WRONGTYPE command: %v %v", failed, err)
	}
	eq("direct after the failed command", direct([]string{"GET", tag + "s"}), []string{"x"})
	eq("HGETALL", must(r.HGetAll(ctx, tag+"h").Result()), map[string]string{"f": "x", "g": "y"})
	must(r.ZAdd(ctx, tag+"z", redis.Z{Score: 2.5, Member: "m"}).Result())
	eq("ZSCORE", must(r.ZScore(ctx, tag+"z", "m").Result()), 2.5)

	// Pub/sub on its own connection, PUBLISH from the pool.
	ch := p + "chan"
	ps := r.Subscribe(ctx, ch)
	must(ps.Receive(ctx))
	check(ps.PSubscribe(ctx, p+"ch*"))
	// go-redis sends PSUBSCRIBE without waiting for its confirmation: wait for it, or a PUBLISH
	// right after may reach the channel subscription only (1 receiver; seen once in CI).
	if sub, ok := must(ps.ReceiveTimeout(ctx, 5*time.Second)).(*redis.Subscription); !ok || sub.Kind != "psubscribe" {
		fail("PSUBSCRIBE confirmation: %#v", sub)
	}
	numsub := must(r.PubSubNumSub(ctx, ch).Result())
	eq("PUBSUB NUMSUB", numsub[ch], int64(1))
	receivers := must(r.Publish(ctx, ch, "hello").Result())
	if receivers != 0 && receivers != 2 {
		fail("PUBLISH receivers: %d", receivers)
	}
	var got []string
	for len(got) < 2 {
		m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			fail("pub/sub receive after %v: %v", got, err)
		}
		switch m := m.(type) {
		case *redis.Message:
			got = append(got, m.Pattern+"|"+m.Channel+"|"+m.Payload)
		case *redis.Subscription:
			// the PSUBSCRIBE confirmation
		default:
			fail("unexpected pub/sub frame %#v", m)
		}
	}
	sort.Strings(got)
	eq("messages", got, []string{p + "ch*|" + ch + "|hello", "|" + ch + "|hello"})
	check(ps.Unsubscribe(ctx, ch))
	check(ps.PUnsubscribe(ctx, p+"ch*"))
	deadline := time.Now().Add(5 * time.Second)
	for must(r.PubSubNumSub(ctx, ch).Result())[ch] != 0 {
		if time.Now().After(deadline) {
			fail("PUBSUB NUMSUB still non-zero after UNSUBSCRIBE")
		}
		time.Sleep(20 * time.Millisecond)
	}
	check(ps.Close())

	// Expiry: EX sets a TTL the cluster sees; PEXPIRE really expires the key.
	eq("SET EX", must(r.Set(ctx, p+"ex", "x", 100*time.Second).Result()), "OK")
	ttl := must(r.TTL(ctx, p+"ex").Result())
	if ttl <= 0 || ttl > 100*time.Second {
		fail("TTL out of range: %v", ttl)
	}
	pttl := must(strconv.Atoi(direct([]string{"PTTL", p + "ex"})[0]))
	if pttl <= 0 || pttl > 100000 {
		fail("direct PTTL out of range: %d", pttl)
	}
	eq("PEXPIRE", must(r.PExpire(ctx, p+"ex", 150*time.Millisecond).Result()), true)
	time.Sleep(200 * time.Millisecond)
	for must(r.Exists(ctx, p+"ex").Result()) != 0 {
		if time.Now().After(deadline.Add(3 * time.Second)) {
			fail("key did not expire")
		}
		time.Sleep(20 * time.Millisecond)
	}
	eq("direct EXISTS after expiry", direct([]string{"EXISTS", p + "ex"}), []string{"0"})

	must(r.Set(ctx, p+"str", "abc", 0).Result())
	_, err = r.Incr(ctx, p+"str").Result()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR value is not an integer") {
		fail("INCR of a string: expected ERR value is not an integer, got %v", err)
	}
	eq("GET after an error", must(r.Get(ctx, p+"str").Result()), "abc")

	cleanup := append(append(append([]string{}, keys[10:]...), extra...), tag+"a", tag+"n", tag+"h", tag+"s", tag+"z", p+"str")
	eq("cleanup DEL", must(r.Del(ctx, cleanup...).Result()), int64(len(cleanup)))
	return fmt.Sprintf("plain %s: %d slots", name, len(slots))
}

// facade runs the checks on a cluster client pointed at redcar's facade listener.
func facade(addr string, proto int) string {
	want, name := protoName(proto)
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{addr}, Protocol: proto, DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, PoolSize: 4, PoolFIFO: true,
	})
	defer rc.Close()

	var masters []string
	check(rc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		masters = append(masters, c.Options().Addr)
		return nil
	}))
	eq("masters from CLUSTER SLOTS", masters, []string{addr})
	hello := must(rc.Do(ctx, "HELLO").Result())
	eq("HELLO proto and mode", []string{helloField(hello, "proto"), helloField(hello, "mode")}, []string{strconv.Itoa(want), "cluster"})

	p := fmt.Sprintf("facade:goredis:%d:%d:", os.Getpid(), want)
	keys := make([]string, 20)
	slots := map[int64]bool{}
	for i := range keys {
		keys[i] = p + strconv.Itoa(i)
		slots[must(strconv.ParseInt(direct([]string{"CLUSTER", "KEYSLOT", keys[i]})[0], 10, 64))] = true
	}
	if len(slots) < 15 {
		fail("keys should span many slots, got %d", len(slots))
	}
	for i, k := range keys {
		eq("SET "+k, must(rc.Set(ctx, k, "v"+strconv.Itoa(i), 0).Result()), "OK")
	}
	for i, k := range keys {
		eq("GET "+k, must(rc.Get(ctx, k).Result()), "v"+strconv.Itoa(i))
	}
	eq("direct GETs", direct(gets(keys)...), values(len(keys), ""))
	// A pipeline across slots: go-redis groups it per node, here redcar alone.
	cmds := must(rc.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, k := range keys {
			pipe.Append(ctx, k, "+")
		}
		return nil
	}))
	for i, c := range cmds {
		eq("pipelined APPEND", c.(*redis.IntCmd).Val(), int64(len("v"+strconv.Itoa(i)+"+")))
	}
	eq("direct after the pipeline", direct(gets(keys)...), values(len(keys), "+"))
	tag := p + "{tx}"
	tx := must(rc.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, tag+"a", "1", 0)
		pipe.Incr(ctx, tag+"n")
		return nil
	}))
	eq("EXEC replies", []any{tx[0].(*redis.StatusCmd).Val(), tx[1].(*redis.IntCmd).Val()}, []any{"OK", int64(1)})
	eq("direct after EXEC", direct([]string{"GET", tag + "a"}, []string{"GET", tag + "n"}), []string{"1", "1"})
	info := must(rc.ClusterInfo(ctx).Result())
	if !strings.HasPrefix(info, "cluster_state:ok") {
		fail("CLUSTER INFO: %q", info)
	}
	for _, k := range append(keys, tag+"a", tag+"n") {
		eq("DEL "+k, must(rc.Del(ctx, k).Result()), int64(1))
	}
	var exists [][]string
	var zeros []string
	for _, k := range keys {
		exists = append(exists, []string{"EXISTS", k})
		zeros = append(zeros, "0")
	}
	eq("direct EXISTS after DEL", direct(exists...), zeros)
	return fmt.Sprintf("cluster %s: %d slots", name, len(slots))
}
