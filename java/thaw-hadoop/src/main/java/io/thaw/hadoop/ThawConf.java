package io.thaw.hadoop;

import java.io.IOException;
import java.net.URI;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;

/**
 * The {@code core-site.xml} keys of {@code thaw://} (documented in docs/hadoop.md),
 * and how a URI plus a {@link Configuration} become the options of a native
 * client. Kept apart from the file system so the resolution rules (authority
 * before {@code fs.thaw.master}, Spark's application id as the job) are tested
 * without a cluster.
 */
public final class ThawConf {
  private ThawConf() {}

  /** A master, or a group of masters ({@code a:1,b:2}); the URI authority wins. */
  public static final String MASTER = "fs.thaw.master";
  /** The job id every read and write carries (migrations, per-job statistics). */
  public static final String JOB = "fs.thaw.job";
  /** A token ({@code thaw auth token}); else THAW_TOKEN / THAW_TOKEN_FILE. */
  public static final String TOKEN = "fs.thaw.token";
  /** The cluster secret (superuser); else THAW_SECRET_FILE. */
  public static final String SECRET_FILE = "fs.thaw.secret.file";
  /** The CA that signed the cluster's certificates (TLS); else THAW_TLS_CA. */
  public static final String TLS_CA = "fs.thaw.tls.ca";
  /** The write type of files created without one: must-cache, cache-through, ... */
  public static final String WRITE_TYPE = "fs.thaw.write.type";
  public static final String WRITE_TYPE_DEFAULT = "cache-through";
  /** Block size of new files (and of splits); unset: the master's (64 MiB by default). */
  public static final String BLOCK_SIZE = "fs.thaw.block.size";
  public static final long BLOCK_SIZE_DEFAULT = 64L << 20;
  /** Entries per listing call: large directories are listed page by page. */
  public static final String LIST_PAGE = "fs.thaw.list.page";
  public static final int LIST_PAGE_DEFAULT = 1000;
  /** Thaw host names as the engine knows them: {@code thawHost=engineHost,...}. */
  public static final String HOST_MAP = "fs.thaw.host.map";
  /** Read block files of this host's workers directly (default true). */
  public static final String SHORT_CIRCUIT = "fs.thaw.short.circuit";
  /** Where remote reads are cached on this host's worker: mem, disk or none. */
  public static final String READ_CACHE = "fs.thaw.read.cache";
  /** This client's host and rack as the workers name theirs (replica order). */
  public static final String CLIENT_HOST = "fs.thaw.client.host";
  public static final String CLIENT_RACK = "fs.thaw.client.rack";
  /** Spark's application id, when Spark put it into the Hadoop configuration. */
  public static final String SPARK_APP_ID = "spark.app.id";

  /** The write types the native client accepts, as the CLI and Python name them (plus {@code replicated:N}). */
  static final String[] WRITE_TYPES = {"must-cache", "cache-through", "through", "async-through"};

  /**
   * Checks a write type, giving it back in lower case; an unknown one is an
   * {@link IllegalArgumentException} naming the valid ones, raised at the
   * caller's line rather than at the first block write.
   */
  public static String writeType(String value, String where) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    for (String t : WRITE_TYPES) {
      if (v.equals(t)) {
        return v;
      }
    }
    if (v.startsWith("replicated:") && v.substring("replicated:".length()).matches("[1-9][0-9]*")) {
      return v;
    }
    throw new IllegalArgumentException(
        "unknown Thaw write type '" + value + "' in " + where
            + ": one of must-cache, cache-through, through, async-through, replicated:N (N DISK copies)");
  }

  /**
   * The masters of {@code uri}: its authority (a host:port, or a group
   * {@code a:1,b:2}, which java.net.URI keeps as a registry authority), else
   * {@code fs.thaw.master}, else {@code THAW_MASTER}. None of them: an
   * IOException saying where to put one.
   */
  static String master(URI uri, Configuration conf) throws IOException {
    String authority = uri.getAuthority();
    if (authority != null && !authority.isEmpty()) {
      return authority;
    }
    String m = conf.getTrimmed(MASTER, "");
    if (!m.isEmpty()) {
      return m;
    }
    String env = System.getenv("THAW_MASTER");
    if (env != null && !env.trim().isEmpty()) {
      return env.trim();
    }
    throw new IOException(
        "no Thaw master for " + uri + ": name it in the URI (thaw://HOST:PORT/), in "
            + MASTER + " or in THAW_MASTER");
  }

  /**
   * The job id: {@code fs.thaw.job}, else Spark's application id when the
   * configuration carries one (a Spark driver's or executor's Hadoop
   * configuration), else none. Per-query job ids come from the Spark
   * integration setting {@code fs.thaw.job} on the query's configuration.
   */
  static String job(Configuration conf) {
    String job = conf.getTrimmed(JOB, "");
    if (!job.isEmpty()) {
      return job;
    }
    String app = conf.getTrimmed(SPARK_APP_ID, "");
    return app.isEmpty() ? null : app;
  }

  /**
   * The native client's options without the job (sorted, so equal settings
   * give equal keys in the {@link ClientCache}). Credentials not set here are
   * read from the environment by the native side.
   */
  static Map<String, String> clientOptions(String master, Configuration conf) {
    Map<String, String> o = new TreeMap<>();
    o.put("master", master);
    put(o, "token", conf.getTrimmed(TOKEN, ""));
    put(o, "secret_file", conf.getTrimmed(SECRET_FILE, ""));
    put(o, "tls_ca", conf.getTrimmed(TLS_CA, ""));
    put(o, "short_circuit", oneOf(conf, SHORT_CIRCUIT, "true", "false"));
    put(o, "read_cache", oneOf(conf, READ_CACHE, "mem", "disk", "none"));
    put(o, "host", conf.getTrimmed(CLIENT_HOST, ""));
    put(o, "rack", conf.getTrimmed(CLIENT_RACK, ""));
    return o;
  }

  /** A key's value if set, checked against the allowed ones (an error names the key). */
  private static String oneOf(Configuration conf, String key, String... allowed) {
    String v = conf.getTrimmed(key, "").toLowerCase(Locale.ROOT);
    if (v.isEmpty() || java.util.Arrays.asList(allowed).contains(v)) {
      return v;
    }
    throw new IllegalArgumentException(key + " is '" + v + "': one of " + String.join(", ", allowed));
  }

  private static void put(Map<String, String> o, String key, String value) {
    if (!value.isEmpty()) {
      o.put(key, value);
    }
  }
}
