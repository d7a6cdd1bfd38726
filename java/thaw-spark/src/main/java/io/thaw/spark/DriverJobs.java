package io.thaw.spark;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkConf;
import scala.Tuple2;

/**
 * The one {@link ThawJobs} of each Spark application in this driver, shared by
 * the session extension and the job listener, closed (every job released)
 * when the application ends.
 */
final class DriverJobs {
  private static final Map<String, ThawJobs> BY_APP = new HashMap<>();
  private static final Map<String, ThawSparkConf> CONF = new HashMap<>();

  private DriverJobs() {}

  static synchronized ThawJobs get(String appId, ThawSparkConf conf) {
    CONF.putIfAbsent(appId, conf);
    return BY_APP.computeIfAbsent(appId, k -> new ThawJobs(conf));
  }

  /** The application's jobs if any were set up, else null (releasing needs no new tracker). */
  static synchronized ThawJobs peek(String appId) {
    return BY_APP.get(appId);
  }

  /** The settings the application's first caller read (null: none yet). */
  static synchronized ThawSparkConf conf(String appId) {
    return CONF.get(appId);
  }

  static void close(String appId) {
    ThawJobs j;
    synchronized (DriverJobs.class) {
      j = BY_APP.remove(appId);
      CONF.remove(appId);
    }
    if (j != null) {
      j.close();
    }
  }

  /** A Hadoop configuration with the application's {@code spark.hadoop.*} keys, as Spark makes it. */
  static Configuration hadoopConf(SparkConf conf) {
    Configuration c = new Configuration();
    for (Tuple2<String, String> kv : conf.getAll()) {
      if (kv._1().startsWith("spark.hadoop.")) {
        c.set(kv._1().substring("spark.hadoop.".length()), kv._2());
      }
    }
    return c;
  }

  /**
   * A job's origin as {@code thaw jobs} shows it: at most 200 bytes of UTF-8,
   * control characters as spaces (the master's limits).
   */
  static String origin(String text) {
    String s = text.replaceAll("\\p{Cntrl}", " ").replaceAll(" +", " ").trim();
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    if (b.length <= 200) {
      return s;
    }
    int n = 197;
    while (n > 0 && (b[n] & 0xC0) == 0x80) {
      n--;
    }
    return new String(b, 0, n, StandardCharsets.UTF_8) + "...";
  }
}
