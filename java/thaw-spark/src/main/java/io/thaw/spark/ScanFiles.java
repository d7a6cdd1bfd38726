package io.thaw.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.ListingPartition;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.exchange.ReusedExchangeExec;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The files a physical plan's scans will read, after partition pruning: each
 * {@link FileSourceScanExec}'s {@code selectedPartitions} (the listing with the
 * partition filters known at planning applied; the scan reuses it, so asking
 * lists nothing twice). Looks through adaptive plans (their input plan),
 * query stages, reused exchanges and subqueries.
 *
 * <p>Dynamic partition pruning filters are only known while the query runs:
 * for a scan that has them, these are the files before that pruning (a
 * superset), which is what can be moved while the query waits.
 */
final class ScanFiles {
  private ScanFiles() {}

  /** The files' paths, each once, in plan order. */
  static List<Path> of(SparkPlan plan) {
    List<Path> out = new ArrayList<>();
    Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    walk(plan, seen, out);
    List<Path> unique = new ArrayList<>(new java.util.LinkedHashSet<>(out));
    return unique;
  }

  private static void walk(SparkPlan p, Set<Object> seen, List<Path> out) {
    if (p == null || !seen.add(p)) {
      return;
    }
    if (p instanceof FileSourceScanExec scan) {
      Iterator<ListingPartition> parts = scan.selectedPartitions().filePartitionIterator();
      while (parts.hasNext()) {
        Iterator<FileStatusWithMetadata> files = parts.next().files();
        while (files.hasNext()) {
          out.add(files.next().getPath());
        }
      }
    } else if (p instanceof AdaptiveSparkPlanExec a) {
      walk(a.inputPlan(), seen, out);
    } else if (p instanceof QueryStageExec q) {
      walk(q.plan(), seen, out);
    } else if (p instanceof ReusedExchangeExec r) {
      walk(r.child(), seen, out);
    }
    for (SparkPlan c : CollectionConverters.asJava(p.children())) {
      walk(c, seen, out);
    }
    for (SparkPlan s : CollectionConverters.asJava(p.subqueries())) {
      walk(s, seen, out);
    }
  }
}
