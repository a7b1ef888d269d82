// The Jedis and Lettuce client program the tests drive (tests/it/clients.rs, tests/it/facade.rs),
// like the go-redis one in tests/clients/go:
//
//   REDCAR_CLUSTER_NODE=HOST:PORT java -jar redcar-java-clients.jar smoke [jedis|lettuce] HOST PORT
//   REDCAR_CLUSTER_NODE=HOST:PORT java -jar redcar-java-clients.jar facade [jedis|lettuce] HOST PORT
//
// `smoke` drives redcar with plain clients (Jedis `RedisClient` + `Jedis`, Lettuce `RedisClient`),
// `facade` with cluster clients (Jedis `RedisClusterClient`, Lettuce `RedisClusterClient`) pointed
// at a --cluster-facade listener. Without a library name both run, in one JVM (start-up is the
// slow part). Each library runs every check with its default protocol and with RESP2 and RESP3
// chosen explicitly, and HELLO must report the protocol in use. Every write is read back from
// the real cluster (a Jedis cluster client on REDCAR_CLUSTER_NODE), never through redcar. The
// first mismatch exits 1 naming the library, mode, protocol, what was expected and what came
// back. Built by scripts/ensure-java-clients.sh into target/java-clients.
package redcar;

import java.util.ArrayList;
import java.util.List;

public final class Main {
    private Main() {}

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: redcar-java-clients smoke|facade [jedis|lettuce]... HOST PORT");
            System.exit(2);
        }
        String mode = args[0];
        String host = args[args.length - 2];
        int port = Integer.parseInt(args[args.length - 1]);
        List<String> libs = new ArrayList<>(List.of(args).subList(1, args.length - 2));
        if (libs.isEmpty()) {
            libs = List.of("jedis", "lettuce");
        }
        if (!mode.equals("smoke") && !mode.equals("facade")) {
            System.err.println("unknown mode " + mode);
            System.exit(2);
        }
        String script = mode + "_java";
        List<String> notes = new ArrayList<>();
        long t0 = System.nanoTime();
        try (Direct direct = Direct.fromEnv()) {
            for (String lib : libs) {
                for (Proto proto : Proto.values()) {
                    Check.context = lib + " " + mode + " " + proto;
                    long t = System.nanoTime();
                    String note;
                    if (lib.equals("jedis")) {
                        note = mode.equals("smoke")
                                ? JedisChecks.plain(host, port, proto, direct)
                                : JedisChecks.cluster(host, port, proto, direct);
                    } else if (lib.equals("lettuce")) {
                        note = mode.equals("smoke")
                                ? LettuceChecks.plain(host, port, proto, direct)
                                : LettuceChecks.cluster(host, port, proto, direct);
                    } else {
                        throw new IllegalArgumentException("unknown library " + lib);
                    }
                    notes.add(String.format("%s %s: %s (%d ms)", lib, proto, note,
                            (System.nanoTime() - t) / 1_000_000));
                }
            }
        } catch (Throwable e) {
            System.err.println(script + ": FAIL: " + Check.context + ": " + e);
            // The frames in this program say which step failed; the library's own frames rarely help.
            for (StackTraceElement frame : e.getStackTrace()) {
                if (frame.getClassName().startsWith("redcar.")) {
                    System.err.println("    at " + frame);
                }
            }
            for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                System.err.println("  caused by: " + c);
            }
            System.out.flush();
            // Lettuce and Jedis leave non-daemon threads behind; exit rather than wait for them.
            Runtime.getRuntime().halt(1);
        }
        System.out.printf("%s: ok: %d checks in %d ms, Jedis %s, Lettuce %s; %s%n", script, Check.count,
                (System.nanoTime() - t0) / 1_000_000, JedisChecks.version(), LettuceChecks.version(),
                String.join("; ", notes));
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    /** The protocol a run asks for: the library's default, or RESP2/RESP3 chosen explicitly. */
    enum Proto {
        DEFAULT, RESP2, RESP3;

        @Override
        public String toString() {
            return this == DEFAULT ? "default protocol" : name();
        }
    }
}
