package io.thaw.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions=io.thaw.spark.ThawSparkExtension}: when a query
 * is planned, the files its scans will read (after partition pruning) are
 * submitted as one Thaw job, so they move into memory while the query waits
 * for executors (Ignem and DYRS: "migrate right after query compilation";
 * Scheduled caching's prefetch hint). The job's lease is renewed while the
 * query runs, and the job is released when the query's SQL execution ends,
 * whether it succeeded or failed (the do-not-evict hint's end).
 *
 * <p>The hook: a pre-columnar physical rule, which Spark applies to every
 * query's whole physical plan while preparing it for execution (with AQE, to
 * the adaptive plan, whose input plan holds every scan), inside the query's
 * SQL execution: the execution id is known, nothing has run yet. AQE applies
 * the rule again to each stage as it is planned; those calls find no new
 * files. A Dataset whose action runs a second time reuses its prepared plan:
 * that execution is not submitted (a new Dataset, as {@code spark.sql} or
 * any transformation makes, is).
 *
 * <p>Spark lists a query's files (with their block locations) when the
 * Dataset is made, before the job exists, so the locations of cold files name
 * no host. After submitting, the rule waits (at most
 * {@code spark.thaw.migrate.bindWaitMs}) for the master to bind the blocks to
 * workers and refreshes the scans' file indexes: the scans, which list when
 * they run, then see each block's migration target (or its memory replica)
 * as its location. This is the step the papers' Hadoop integrations did not
 * need (HDFS locations name disk replicas); without it, delay scheduling has
 * nothing to wait for.
 *
 * <p>Job ids are {@code <spark.thaw.job.prefix><appId>-<executionId>}; the
 * origin is {@code spark <appId> query <executionId> <description>}, which
 * {@code thaw jobs} and the dashboard show.
 */
public final class ThawSparkExtension extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  private static final Logger LOG = LoggerFactory.getLogger(ThawSparkExtension.class);

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectColumnar(ThawSparkExtension::rule);
    return BoxedUnit.UNIT;
  }

  private static ColumnarRule rule(SparkSession session) {
    Rule<SparkPlan> submit = new PlannedQuery(session);
    return new ColumnarRule() {
      @Override
      public Rule<SparkPlan> preColumnarTransitions() {
        return submit;
      }
    };
  }

  /** The rule: submits the plan's input files, returns the plan unchanged. */
  static final class PlannedQuery extends Rule<SparkPlan> {
    private final SparkSession session;

    PlannedQuery(SparkSession session) {
      this.session = session;
    }

    @Override
    public SparkPlan apply(SparkPlan plan) {
      try {
        if (enabled(session)) {
          submit(session.sparkContext(), plan);
        }
      } catch (RuntimeException | LinkageError e) {
        LOG.warn("Thaw: could not submit the query's inputs: {}", e.toString());
      }
      return plan;
    }
  }

  /**
   * Whether this session submits its queries' inputs: {@code spark.thaw.migrate.enabled}
   * as the session has it now ({@code spark.conf.set} turns it on or off per
   * session, between queries), else the application's setting (default true).
   */
  static boolean enabled(SparkSession session) {
    String v = session.conf().get(ThawSparkConf.ENABLED, "");
    if (v.isEmpty()) {
      return session.sparkContext().getConf().getBoolean(ThawSparkConf.ENABLED, true);
    }
    return Boolean.parseBoolean(v.trim());
  }

  static void submit(SparkContext sc, SparkPlan plan) {
    String exec = sc.getLocalProperty("spark.sql.execution.id");
    if (exec == null || exec.isEmpty()) {
      return; // planned without running (explain, a cached plan's analysis)
    }
    String appId = sc.applicationId();
    ThawJobs jobs = jobs(sc);
    if (jobs == null) {
      return;
    }
    ThawSparkConf conf = DriverJobs.conf(appId);
    List<String[]> paths = new ArrayList<>();
    ScanFiles scans = ScanFiles.of(plan, u -> conf.thawPath(u) != null);
    for (Path p : scans.files) {
      String[] t = conf.thawPath(p.toUri());
      if (t != null) {
        paths.add(t);
      }
    }
    if (paths.isEmpty()) {
      return;
    }
    long id = Long.parseLong(exec);
    String origin = DriverJobs.origin("spark " + appId + " query " + id + " " + describe(sc, paths));
    String job = conf.queryJob(appId, id);
    if (jobs.submit(job, origin, paths) > 0 && conf.bindWaitMs > 0) {
      // The listing the scans were planned with predates the job: once the
      // master has chosen where each block goes, list again, so the scans'
      // block locations name those hosts and Spark's delay scheduling runs
      // each task where its input will be in memory.
      jobs.awaitBound(job, conf.bindWaitMs);
      scans.indexes.forEach(FileIndex::refresh);
    }
  }

  /**
   * What the query is, for people: the job description the application set
   * ({@code setJobDescription}, {@code spark.job.description}), else its call
   * site as PySpark or the application named it ({@code callSite.short}), else
   * the directory its files share.
   */
  static String describe(SparkContext sc, List<String[]> paths) {
    for (String key : new String[] {"spark.job.description", "callSite.short"}) {
      String d = sc.getLocalProperty(key);
      if (d != null && !d.isBlank()) {
        return d;
      }
    }
    String common = null;
    for (String[] p : paths) {
      String dir = p[1].substring(0, Math.max(1, p[1].lastIndexOf('/')));
      common = common == null ? dir : commonDir(common, dir);
    }
    return "reads " + paths.size() + " file(s) under " + common;
  }

  static String commonDir(String a, String b) {
    String[] x = a.split("/", -1);
    String[] y = b.split("/", -1);
    StringBuilder out = new StringBuilder();
    for (int i = 1; i < Math.min(x.length, y.length) && x[i].equals(y[i]); i++) {
      out.append('/').append(x[i]);
    }
    return out.length() == 0 ? "/" : out.toString();
  }

  /** Applications whose query-end listener is registered. */
  private static final java.util.Set<String> LISTENING = new java.util.HashSet<>();

  /** The application's jobs, set up (with the listener that ends queries' jobs) on first use. */
  private static ThawJobs jobs(SparkContext sc) {
    String appId = sc.applicationId();
    synchronized (ThawSparkExtension.class) {
      ThawSparkConf conf = DriverJobs.conf(appId);
      if (conf == null) {
        conf = new ThawSparkConf(sc.getConf(), sc.hadoopConfiguration());
      }
      if (LISTENING.add(appId)) {
        sc.addSparkListener(new QueryEnds(appId, conf));
      }
      // Whether to submit is the session's to say (enabled(session)).
      return DriverJobs.get(appId, conf);
    }
  }

  /** Releases a query's job when its SQL execution ends (success or failure), all at the application's end. */
  static final class QueryEnds extends SparkListener {
    private final String appId;
    private final ThawSparkConf conf;

    QueryEnds(String appId, ThawSparkConf conf) {
      this.appId = appId;
      this.conf = conf;
    }

    @Override
    public void onOtherEvent(SparkListenerEvent event) {
      ThawJobs jobs = DriverJobs.peek(appId);
      if (event instanceof SparkListenerSQLExecutionEnd end && jobs != null) {
        jobs.release(conf.queryJob(appId, end.executionId()));
      }
    }

    @Override
    public void onApplicationEnd(SparkListenerApplicationEnd end) {
      DriverJobs.close(appId);
      synchronized (ThawSparkExtension.class) {
        LISTENING.remove(appId);
      }
    }
  }
}
