package io.thaw.spark;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerApplicationStart;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.storage.RDDInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code spark.extraListeners=io.thaw.spark.ThawJobListener}: RDD jobs over
 * {@code thaw://} files get their inputs moved into memory when the job is
 * submitted (before its first stage's tasks wait for executors), and released
 * when it ends.
 *
 * <p>Where the inputs are known: Spark names each RDD that reads files
 * ({@code textFile}, {@code hadoopFile}, {@code newAPIHadoopFile},
 * {@code wholeTextFiles}, {@code binaryFiles}, ...) by its path argument
 * (comma-separated paths, globs allowed), and the job-start event lists every
 * stage's RDDs with their names. Names that are entirely such paths, of a
 * submitted scheme, are the job's inputs; globs are expanded through Hadoop's
 * {@code FileSystem}, directories are expanded by the master. Jobs of a SQL
 * execution are left to {@link ThawSparkExtension}, which knows their files
 * after partition pruning.
 *
 * <p>Job ids are {@code <prefix><appId>-job<jobId>}; the origin is
 * {@code spark <appId> job <jobId> <description>}.
 */
public final class ThawJobListener extends SparkListener {
  private static final Logger LOG = LoggerFactory.getLogger(ThawJobListener.class);

  private final SparkConf sparkConf;
  private volatile String appId;
  private volatile ThawSparkConf conf;

  public ThawJobListener(SparkConf conf) {
    this.sparkConf = conf;
    this.appId = conf.get("spark.app.id", null);
  }

  @Override
  public void onApplicationStart(SparkListenerApplicationStart start) {
    if (start.appId().isDefined()) {
      appId = start.appId().get();
    }
  }

  private ThawSparkConf conf() {
    ThawSparkConf c = conf;
    if (c == null) {
      c = DriverJobs.conf(appId);
      if (c == null) {
        c = new ThawSparkConf(sparkConf, DriverJobs.hadoopConf(sparkConf));
      }
      conf = c;
    }
    return c;
  }

  @Override
  public void onJobStart(SparkListenerJobStart start) {
    Properties props = start.properties();
    if (appId == null || props != null && props.getProperty("spark.sql.execution.id") != null) {
      return;
    }
    try {
      ThawSparkConf c = conf();
      if (!c.enabled) {
        return;
      }
      List<String[]> paths = inputs(c, start, sparkConf);
      if (paths.isEmpty()) {
        return;
      }
      String desc = props == null ? null : props.getProperty("spark.job.description");
      if (desc == null || desc.isEmpty()) {
        desc = props == null ? "" : props.getProperty("callSite.short", "");
      }
      String origin = DriverJobs.origin("spark " + appId + " job " + start.jobId() + " " + desc);
      DriverJobs.get(appId, c).submit(c.rddJob(appId, start.jobId()), origin, paths);
    } catch (RuntimeException | LinkageError e) {
      LOG.warn("Thaw: could not submit job {}'s inputs: {}", start.jobId(), e.toString());
    }
  }

  @Override
  public void onJobEnd(SparkListenerJobEnd end) {
    ThawSparkConf c = conf;
    ThawJobs jobs = appId == null ? null : DriverJobs.peek(appId);
    if (c != null && jobs != null) {
      jobs.release(c.rddJob(appId, end.jobId()));
    }
  }

  @Override
  public void onApplicationEnd(SparkListenerApplicationEnd end) {
    if (appId != null) {
      DriverJobs.close(appId);
    }
  }

  /** The job's input files and directories, as {authority, Thaw path} pairs. */
  static List<String[]> inputs(ThawSparkConf c, SparkListenerJobStart start, SparkConf sc) {
    Set<String> names = new LinkedHashSet<>();
    for (StageInfo s : CollectionConverters.asJava(start.stageInfos())) {
      for (RDDInfo r : CollectionConverters.asJava(s.rddInfos())) {
        names.add(r.name());
      }
    }
    Configuration hadoop = null;
    List<String[]> out = new ArrayList<>();
    for (String name : names) {
      List<URI> uris = paths(c, name);
      if (uris == null) {
        continue;
      }
      for (URI u : uris) {
        if (u.getPath().matches(".*[*?\\[{].*")) {
          if (hadoop == null) {
            hadoop = DriverJobs.hadoopConf(sc);
          }
          for (URI g : glob(u, hadoop)) {
            String[] t = c.thawPath(g);
            if (t != null) {
              out.add(t);
            }
          }
        } else {
          out.add(c.thawPath(u));
        }
      }
    }
    return out;
  }

  /** An RDD name's URIs, when it is entirely comma-separated paths of submitted schemes; else null. */
  static List<URI> paths(ThawSparkConf c, String name) {
    if (name == null || name.isEmpty() || !name.contains("/")) {
      return null;
    }
    List<URI> out = new ArrayList<>();
    for (String part : name.split(",")) {
      String p = part.trim();
      URI u;
      try {
        u = new Path(p).toUri();
      } catch (IllegalArgumentException e) {
        return null;
      }
      if (u.getScheme() == null || c.thawPath(stripGlob(u)) == null) {
        return null;
      }
      out.add(u);
    }
    return out;
  }

  private static URI stripGlob(URI u) {
    String path = u.getPath();
    int cut = path.length();
    for (char ch : new char[] {'*', '?', '[', '{'}) {
      int i = path.indexOf(ch);
      if (i >= 0) {
        cut = Math.min(cut, i);
      }
    }
    String head = path.substring(0, cut);
    int slash = head.lastIndexOf('/');
    String dir = slash <= 0 ? "/" : head.substring(0, slash);
    try {
      return new URI(u.getScheme(), u.getAuthority(), dir, null, null);
    } catch (URISyntaxException e) {
      return u;
    }
  }

  private static List<URI> glob(URI u, Configuration hadoop) {
    List<URI> out = new ArrayList<>();
    try {
      Path p = new Path(u);
      FileSystem fs = p.getFileSystem(hadoop);
      FileStatus[] found = fs.globStatus(p);
      if (found != null) {
        for (FileStatus f : found) {
          out.add(f.getPath().toUri());
        }
      }
    } catch (IOException e) {
      LOG.warn("Thaw: could not expand {}: {}", u, e.toString());
    }
    return out;
  }
}
