package io.thaw.hadoop;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

/**
 * Thaw host names as the engine knows them ({@code fs.thaw.host.map}:
 * {@code thawHost=engineHost,...}). Spark and YARN match a block's hosts
 * against the names their executors report; a worker started with another
 * {@code --host} (an IP where Spark says a name, or {@code localhost}, which
 * Spark drops from preferred locations) would never be local without it.
 * Hosts not in the map pass unchanged.
 */
public final class HostMap {
  public static final HostMap EMPTY = new HostMap(Collections.emptyMap());

  private final Map<String, String> map;

  private HostMap(Map<String, String> map) {
    this.map = map;
  }

  /**
   * Parses {@code a=b,c=d} (spaces around names ignored; empty: no mapping).
   * A malformed entry is an {@link IllegalArgumentException} that quotes it.
   */
  public static HostMap parse(String spec) {
    if (spec == null || spec.trim().isEmpty()) {
      return EMPTY;
    }
    Map<String, String> m = new HashMap<>();
    for (String entry : spec.split(",")) {
      if (entry.trim().isEmpty()) {
        continue;
      }
      String[] kv = entry.split("=", -1);
      if (kv.length != 2 || kv[0].trim().isEmpty() || kv[1].trim().isEmpty()) {
        throw new IllegalArgumentException(
            ThawConf.HOST_MAP + ": '" + entry.trim() + "' is not thawHost=engineHost (in '" + spec + "')");
      }
      String prev = m.put(kv[0].trim(), kv[1].trim());
      if (prev != null) {
        throw new IllegalArgumentException(ThawConf.HOST_MAP + ": host '" + kv[0].trim() + "' is mapped twice");
      }
    }
    return new HostMap(Collections.unmodifiableMap(m));
  }

  /** The engine's name for a Thaw host. */
  public String apply(String thawHost) {
    return map.getOrDefault(thawHost, thawHost);
  }
}
