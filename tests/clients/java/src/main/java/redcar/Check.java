package redcar;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/** Assertions that name the run they failed in (library, mode, protocol) and count what passed. */
final class Check {
    static int count;
    static String context = "";

    private Check() {}

    static void eq(String what, Object got, Object want) {
        count++;
        if (!Objects.equals(got, want)) {
            throw new AssertionError(what + ": expected " + show(want) + ", got " + show(got));
        }
    }

    static void that(String what, boolean ok, Object got) {
        count++;
        if (!ok) {
            throw new AssertionError(what + ": got " + show(got));
        }
    }

    /** The exception `body` throws, which must be one whose message starts with `prefix`. */
    static void fails(String what, String prefix, Runnable body) {
        count++;
        try {
            body.run();
        } catch (RuntimeException e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t.getMessage() != null && t.getMessage().startsWith(prefix)) {
                    return;
                }
            }
            throw new AssertionError(what + ": expected an error starting with " + show(prefix) + ", got " + e, e);
        }
        throw new AssertionError(what + ": expected an error starting with " + show(prefix) + ", got none");
    }

    /** A field of a map reply (HELLO, PUBSUB NUMSUB), whatever shape the library hands it over in. */
    static String field(Object reply, String field) {
        if (reply instanceof Map<?, ?> map) {
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (text(e.getKey()).equals(field)) {
                    return text(e.getValue());
                }
            }
        } else if (reply instanceof List<?> list && !list.isEmpty() && list.get(0) instanceof Map.Entry<?, ?>) {
            // Jedis in RESP3 hands a map over as a list of entries.
            for (Object o : list) {
                Map.Entry<?, ?> e = (Map.Entry<?, ?>) o;
                if (text(e.getKey()).equals(field)) {
                    return text(e.getValue());
                }
            }
        } else if (reply instanceof List<?> list) {
            for (int i = 0; i + 1 < list.size(); i += 2) {
                if (text(list.get(i)).equals(field)) {
                    return text(list.get(i + 1));
                }
            }
        }
        throw new AssertionError("reply has no field " + field + ": " + show(reply));
    }

    static String text(Object o) {
        return o instanceof byte[] b ? new String(b, java.nio.charset.StandardCharsets.UTF_8) : String.valueOf(o);
    }

    static String show(Object o) {
        if (o instanceof String s) {
            return '"' + s + '"';
        }
        if (o instanceof byte[] b) {
            return "b\"" + text(b) + '"';
        }
        if (o instanceof Map.Entry<?, ?> e) {
            return show(e.getKey()) + "=" + show(e.getValue());
        }
        if (o instanceof List<?> l) {
            List<String> items = new ArrayList<>();
            l.forEach(x -> items.add(show(x)));
            return items.toString();
        }
        return String.valueOf(o);
    }

    /** `n` values "v0" + suffix ... "v{n-1}" + suffix. */
    static List<String> values(int n, String suffix) {
        List<String> v = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            v.add("v" + i + suffix);
        }
        return v;
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
