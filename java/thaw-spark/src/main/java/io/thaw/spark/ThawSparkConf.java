package io.thaw.spark;

import io.thaw.client.ThawClient;
import io.thaw.client.ThawException;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkConf;

/**
 * The Spark configuration keys of the Spark integration (documented in
 * docs/spark.md), and the native client they describe. Each client option is
 * taken from {@code spark.thaw.*}, else from the Hadoop configuration's
 * {@code fs.thaw.*} (what {@code thaw://} itself reads, so one
 * {@code spark.hadoop.fs.thaw.master} serves both), else from the environment
 * ({@code THAW_MASTER}, {@code THAW_TOKEN}, ...), which the native client reads.
 */
public final class ThawSparkConf {
  /** Prefix of every job id this integration submits: {@code <prefix><appId>-<executionId>}. */
  public static final String JOB_PREFIX = "spark.thaw.job.prefix";
  public static final String JOB_PREFIX_DEFAULT = "spark-";
  /** A job's lease, renewed a third of the way through while the query runs. */
  public static final String LEASE_MS = "spark.thaw.lease.ms";
  public static final long LEASE_MS_DEFAULT = 60_000;
  /** Submit jobs at all (the extension stays installed, inert, when false). */
  public static final String ENABLED = "spark.thaw.migrate.enabled";
  /**
   * URI schemes whose files are submitted (default {@code thaw}). Adding
   * {@code file} with {@link #LOCAL_ROOT} submits the Thaw paths of local
   * files under the under-store directory: how the tests drive the extension
   * on files Spark reads directly.
   */
  public static final String SCHEMES = "spark.thaw.migrate.schemes";
  /** How long planning waits for a new job's blocks to be bound to workers before relisting (0: no relisting). */
  public static final String BIND_WAIT_MS = "spark.thaw.migrate.bindWaitMs";
  public static final long BIND_WAIT_MS_DEFAULT = 1000;
  /** The local directory that is Thaw's root (its local under-store), for {@code file:} paths. */
  public static final String LOCAL_ROOT = "spark.thaw.migrate.localRoot";

  private static final String[][] CLIENT_OPTIONS = {
    {"master", "spark.thaw.master", "fs.thaw.master"},
    {"token", "spark.thaw.token", "fs.thaw.token"},
    {"secret_file", "spark.thaw.secret.file", "fs.thaw.secret.file"},
    {"tls_ca", "spark.thaw.tls.ca", "fs.thaw.tls.ca"},
  };

  final String jobPrefix;
  final long leaseMs;
  final boolean enabled;
  final long bindWaitMs;
  final Set<String> schemes;
  final String localRoot;
  final Map<String, String> clientOptions;

  ThawSparkConf(SparkConf conf, Configuration hadoop) {
    jobPrefix = conf.get(JOB_PREFIX, JOB_PREFIX_DEFAULT);
    leaseMs = conf.getLong(LEASE_MS, LEASE_MS_DEFAULT);
    if (leaseMs < 1000) {
      throw new IllegalArgumentException(LEASE_MS + "=" + leaseMs + ": a lease is at least 1000 ms");
    }
    enabled = conf.getBoolean(ENABLED, true);
    bindWaitMs = conf.getLong(BIND_WAIT_MS, BIND_WAIT_MS_DEFAULT);
    schemes = new LinkedHashSet<>();
    for (String s : conf.get(SCHEMES, "thaw").split(",")) {
      if (!s.isBlank()) {
        schemes.add(s.trim().toLowerCase(Locale.ROOT));
      }
    }
    String root = conf.get(LOCAL_ROOT, "");
    localRoot = root.isEmpty() ? null : stripSlash(root);
    if (schemes.contains("file") && localRoot == null) {
      throw new IllegalArgumentException(
          SCHEMES + " names file: set " + LOCAL_ROOT + " to the local directory that is Thaw's root");
    }
    clientOptions = new TreeMap<>();
    for (String[] o : CLIENT_OPTIONS) {
      String v = conf.get(o[1], "");
      if (v.isEmpty() && hadoop != null) {
        v = hadoop.getTrimmed(o[2], "");
      }
      if (!v.isEmpty()) {
        clientOptions.put(o[0], v);
      }
    }
  }

  /** A client of the cluster these settings name (the URI's authority, if given, as its master). */
  ThawClient connect(String authority) throws ThawException {
    Map<String, String> o = new TreeMap<>(clientOptions);
    if (authority != null && !authority.isEmpty()) {
      o.put("master", authority);
    }
    return ThawClient.connect(o);
  }

  /** The job id of SQL execution {@code executionId} of application {@code appId}. */
  String queryJob(String appId, long executionId) {
    return jobPrefix + appId + "-" + executionId;
  }

  /** The job id of Spark job {@code jobId} (an RDD job outside any SQL execution). */
  String rddJob(String appId, int jobId) {
    return jobPrefix + appId + "-job" + jobId;
  }

  /**
   * The Thaw path of a file Spark names by {@code uri}, or null when its
   * scheme is not submitted ({@link #SCHEMES}) or a local file lies outside
   * {@link #LOCAL_ROOT}. Returns {authority, path}.
   */
  String[] thawPath(java.net.URI uri) {
    String scheme = uri.getScheme() == null ? "file" : uri.getScheme().toLowerCase(Locale.ROOT);
    if (!schemes.contains(scheme)) {
      return null;
    }
    String path = uri.getPath();
    if (path == null || path.isEmpty()) {
      return null;
    }
    if (scheme.equals("file")) {
      if (!(path.equals(localRoot) || path.startsWith(localRoot + "/"))) {
        return null;
      }
      path = path.substring(localRoot.length());
      return new String[] {null, path.isEmpty() ? "/" : path};
    }
    return new String[] {uri.getAuthority(), path};
  }

  private static String stripSlash(String s) {
    String t = s;
    while (t.length() > 1 && t.endsWith("/")) {
      t = t.substring(0, t.length() - 1);
    }
    return t;
  }

  @Override
  public String toString() {
    return "ThawSparkConf" + Arrays.asList(jobPrefix, leaseMs, enabled, schemes, localRoot);
  }
}
